"""Flat layout of a statistics vector: a (n_classes, n_columns) table, row-major.

Row ``y`` holds class ``y``'s statistics; the columns are split into named
contiguous blocks (e.g. ``count``, ``sum``, ``sumsq``). A flat vector ``s``
of length ``n_classes * n_columns`` is ``table.reshape(-1)``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    n_classes: int
    blocks: tuple[tuple[str, int], ...]

    @property
    def n_columns(self) -> int:
        return sum(width for _, width in self.blocks)

    @property
    def size(self) -> int:
        return self.n_classes * self.n_columns

    def columns(self, name: str) -> slice:
        """Column slice of block ``name`` within a class row."""
        start = 0
        for block, width in self.blocks:
            if block == name:
                return slice(start, start + width)
            start += width
        raise KeyError(name)

    def describe(self) -> dict:
        return {"n_classes": self.n_classes, "blocks": [[name, width] for name, width in self.blocks]}

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()
