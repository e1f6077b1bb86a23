"""``--model`` and every model's structure options as click options, derived from the models' declarations.

Kept apart from ``crc.cli.options`` so that ``crc node`` can use them without importing the graph library.
"""

from __future__ import annotations

import click

from crc.cli.finite import FiniteFloatRange
from crc.core.models import MODELS, Option, all_options


def _click_type(option: Option):
    if option.choices:
        return click.Choice(option.choices)
    if option.kind is int:
        return click.IntRange(min=option.low, max=option.high)
    if option.kind is float:
        return FiniteFloatRange(min=option.low, max=option.high)
    return click.STRING


def model_choice(default: str = "nb"):
    """The ``--model`` option."""
    kinds = "; ".join(f"{name}: {kind.summary}" for name, kind in MODELS.items())
    return click.option("--model", type=click.Choice(list(MODELS)), default=default, show_default=True,
                        help=f"Generative classifier ({kinds}).")


def option_decorators() -> list:
    """One click option per declared model option, with its declared default, bounds and help."""
    return [click.option(option.flag, option.name, type=_click_type(option), default=option.default, show_default=True,
                         help=option.help) for option in all_options()]


def with_model_options(function):
    """Decorator adding ``--model`` and every model option; the command receives them as keyword arguments."""
    for decorator in reversed([model_choice(), *option_decorators()]):
        function = decorator(function)
    return function
