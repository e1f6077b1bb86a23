"""A click number type for options that must be finite numbers."""

from __future__ import annotations

import math

import click


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses nan and infinity, which its bounds let through (a peer's --timeout inf
    waited for a silent neighbour forever; nan ended in a traceback)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number
