"""The circuit options (``--structure`` ... ``--structure-seed``), defined once for every command.

Kept apart from ``cli.options`` so that ``crc node`` can use them without importing the graph library.
"""

from __future__ import annotations

import click

from crc.core.models import CIRCUIT_DEFAULTS, CIRCUIT_STRUCTURES


def circuit_options(defaults: dict = CIRCUIT_DEFAULTS) -> dict:
    """click option decorators by parameter name, with the given defaults."""
    return {
        "structure": click.option("--structure", type=click.Choice(sorted(CIRCUIT_STRUCTURES)), default=defaults["structure"],
                                  show_default=True, help="Circuit (--model pc): a mixture of products per class, "
                                                          "or a random region graph (RAT-SPN style)."),
        "components": click.option("--components", type=click.IntRange(min=1), default=defaults["components"],
                                   show_default=True, help="Mixture circuit: product components per class; 1 is naive Bayes."),
        "depth": click.option("--depth", type=click.IntRange(min=1), default=defaults["depth"], show_default=True,
                              help="Region-graph circuit: levels of random binary feature splits."),
        "repetitions": click.option("--repetitions", type=click.IntRange(min=1), default=defaults["repetitions"],
                                    show_default=True, help="Region-graph circuit: independent random splits mixed at the top."),
        "sums": click.option("--sums", type=click.IntRange(min=1), default=defaults["sums"], show_default=True,
                             help="Region-graph circuit: sum nodes per region (and leaf channels per leaf region)."),
        "structure_seed": click.option("--structure-seed", type=int, default=defaults["structure_seed"], show_default=True,
                                       help="Circuit (--model pc): seed of the structure and of the start's symmetry "
                                            "breaking; part of the schema id, so all peers must share it."),
    }


def with_circuit_options(function):
    """Decorator adding every circuit option with its default."""
    for option in reversed(list(circuit_options().values())):
        function = option(function)
    return function
