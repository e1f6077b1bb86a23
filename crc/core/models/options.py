"""A model's structure options, declared once.

Every model kind lists its options as ``Option`` objects. The command-line
flags of every command that takes a model, the simulation configuration, the
``crc node`` command line that ``crc launch`` writes, the model file and the
checks of untrusted option values all derive from that one declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crc.core.errors import CRCError, plain


@dataclass(frozen=True)
class Option:
    """One structure setting of a model.

    ``kind`` is ``int``, ``float`` or ``str``; numbers are bounded by ``low`` and
    ``high`` (inclusive, ``None`` for no bound), strings by ``choices``.
    """

    name: str
    kind: type
    default: object
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--structure-seed``."""
        return "--" + self.name.replace("_", "-")

    def check(self, value):
        """``value`` if it has the right type and lies within the bounds, else a CRCError naming the option."""
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.kind) or isinstance(value, bool):
            raise CRCError(f"model option {self.name!r} must be of type {self.kind.__name__}, got {plain(value)}")
        if self.choices and value not in self.choices:
            raise CRCError(f"model option {self.name!r} must be one of {', '.join(self.choices)}, got {plain(value)}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise CRCError(f"model option {self.name!r} must lie in [{self.low}, {self.high}], got {plain(value)}")
        return value


def model_named(model: str, structure: str | None) -> str:
    """A model as summaries, reports and warnings name it: 'nb', 'qda', but 'pc (mixture)' and 'pc (region-graph)',
    whose runs differ."""
    return model + (f" ({structure})" if structure else "")


def select(options: tuple[Option, ...], settings: Mapping) -> dict:
    """The values of ``options`` in ``settings`` (which may hold other settings too), defaults where absent, checked."""
    return {option.name: option.check(settings.get(option.name, option.default)) for option in options}


def check_exact(options: tuple[Option, ...], given: Mapping, what: str) -> dict:
    """``given`` checked against ``options``: no unknown name, every value valid; absent ones take their defaults."""
    known = {option.name for option in options}
    unknown = sorted(set(given) - known)
    if unknown:
        raise CRCError(f"{what} does not take the option(s) {', '.join(unknown)}"
                       + (f"; it takes {', '.join(sorted(known))}" if known else ""))
    return select(options, given)
