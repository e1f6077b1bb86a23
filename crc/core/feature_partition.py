"""Vertical and hybrid partitions: which peer holds which features of which instances.

``vertical:K`` — one group of peers holds every pooled training instance,
aligned by an instance id; the features are cut into K disjoint blocks, one
per peer. ``hybrid:GxK`` — the instances are cut into G groups and the
features into K blocks; peer (g, b) holds block b of group g's instances, so
every block is held by G peers for different instances. ``hybrid:K`` is
``hybrid:KxK``; a bare ``vertical`` or ``hybrid`` is K = 2.

Within a group the blocks' scores of the shared instances are summed; across
groups each block's statistics are averaged by gossip on the group graph
(``crc.protocol.vertical``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from crc.core.errors import CRCError
from crc.core.files import read_json

MAX_BLOCKS_FILE_BYTES = 1 << 20

FEATURE_PARTITIONS = ("vertical", "hybrid")
DEFAULT_BLOCKS = 2
FEATURE_PARTITION_HELP = (
    "vertical[:K] (every peer of one group holds all training instances, the features cut into K blocks, one per "
    "peer; K = 2 by default), hybrid[:GxK] (G groups of instances x K blocks of features, peer (g, b) holds block b "
    "of group g; hybrid:K is KxK, bare hybrid 2x2)"
)
_SPEC = re.compile(r"^(vertical|hybrid)(?::(\d{1,4})(?:x(\d{1,4}))?)?$")


@dataclass(frozen=True)
class FeaturePartition:
    """``groups`` groups of instances times ``blocks`` blocks of features; ``groups * blocks`` peers."""

    kind: str
    groups: int
    blocks: int

    @property
    def peers(self) -> int:
        return self.groups * self.blocks

    @property
    def spec(self) -> str:
        """The canonical spelling: ``vertical:K`` or ``hybrid:GxK``."""
        return f"vertical:{self.blocks}" if self.kind == "vertical" else f"hybrid:{self.groups}x{self.blocks}"

    def peer(self, group: int, block: int) -> int:
        """Peer number of (group, block): peers are numbered group by group."""
        return group * self.blocks + block


def is_feature_partition(spec: str) -> bool:
    """Whether ``spec`` names a vertical or hybrid partition (well formed or not)."""
    return spec.split(":", 1)[0] in FEATURE_PARTITIONS


def parse_feature_partition(spec: str) -> FeaturePartition:
    """``vertical[:K]`` or ``hybrid[:G[xK]]`` -> FeaturePartition; a CRCError for anything else."""
    match = _SPEC.match(spec)
    if not match:
        raise CRCError(f"malformed partition {spec!r}: expected vertical[:K] or hybrid[:GxK] (for example vertical:3, "
                       "hybrid:2x3)")
    kind, first, second = match.group(1), match.group(2), match.group(3)
    if kind == "vertical":
        if second is not None:
            raise CRCError(f"malformed partition {spec!r}: a vertical partition has one group, give vertical:K")
        blocks, groups = int(first) if first else DEFAULT_BLOCKS, 1
    else:
        groups = int(first) if first else DEFAULT_BLOCKS
        blocks = int(second) if second else groups
        if groups < 2:
            raise CRCError(f"partition {spec!r}: a hybrid partition needs at least 2 groups (one group is vertical:K)")
    if blocks < 1:
        raise CRCError(f"partition {spec!r}: need at least one feature block")
    return FeaturePartition(kind, groups, blocks)


def feature_blocks(n_features: int, blocks: int, *, seed=None) -> list[list[int]]:
    """A seeded cut of features 0 .. n_features - 1 into ``blocks`` disjoint blocks of near-equal sizes, each
    sorted; a CRCError when there are fewer features than blocks."""
    if blocks > n_features:
        raise CRCError(f"cannot cut {n_features} features into {blocks} blocks of at least one feature: give at most "
                       f"{n_features} block{'s' if n_features > 1 else ''}")
    order = np.random.default_rng(seed).permutation(n_features)
    return [sorted(part.tolist()) for part in np.array_split(order, blocks)]


def blocks_from_names(names: list[list[str]], feature_names: list[str], what: str) -> list[list[int]]:
    """Blocks given by feature names (as a blocks file lists them) -> feature indices; a CRCError naming ``what``
    for an unknown name, a name in two blocks, or a feature in none."""
    index = {name: j for j, name in enumerate(feature_names)}
    block_of: dict[str, int] = {}
    out = []
    for b, block in enumerate(names):
        unknown = [name for name in block if name not in index]
        if unknown:
            raise CRCError(f"{what}: block {b} names unknown feature(s) {', '.join(map(repr, unknown[:5]))}")
        for name in block:
            if name in block_of:
                where = f"twice in block {b}" if block_of[name] == b else f"in block {block_of[name]} and block {b}"
                raise CRCError(f"{what}: feature {name!r} is {where}: name each feature in exactly one block")
            block_of[name] = b
        out.append([index[name] for name in block])
    missing = [name for name in feature_names if name not in block_of]
    if missing:
        raise CRCError(f"{what}: feature(s) {', '.join(map(repr, missing[:5]))} are in no block: name each feature of "
                       "the schema in exactly one block")
    return out


def read_blocks_file(path) -> tuple[tuple[str, ...], ...]:
    """A blocks file: JSON ``{"blocks": [["age", "income"], ["diagnosis", ...], ...]}``, block ``b`` the feature
    names peer ``b`` of every group holds. A CRCError naming the file for anything else."""
    obj = read_json(path, max_bytes=MAX_BLOCKS_FILE_BYTES, what="blocks file")
    blocks = obj.get("blocks") if isinstance(obj, dict) else None
    if not (isinstance(blocks, list) and blocks and all(isinstance(block, list) and block for block in blocks)
            and all(isinstance(name, str) for block in blocks for name in block)):
        raise CRCError(f'{path}: expected {{"blocks": [[feature names of block 0], [of block 1], ...]}}, '
                       "every block a non-empty list of names")
    others = sorted(set(obj) - {"blocks"})
    if others:  # a misspelt or misplaced setting would otherwise be dropped without a word
        raise CRCError(f"{path}: unknown key(s) {', '.join(map(repr, others))}: a blocks file holds \"blocks\" alone")
    return tuple(tuple(block) for block in blocks)
