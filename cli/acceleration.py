"""The algorithm and the options of accelerated CRC, shared by ``crc simulate``, ``crc launch``, ``crc node`` and ``crc experiment``
(kept light: ``crc node`` imports it)."""

from __future__ import annotations

import click

from crc.cli.finite import FiniteFloatRange
from crc.core.acceleration import ACCELERATED, ALGORITHMS, CLASSIFIERS, DEFAULT_ALGORITHM, MODEL_SETTINGS, PAPER_SETTINGS, STARTS

_CHANGES = " ".join(f"--{name.replace('_', '-')} {value}" if not isinstance(value, bool) else f"--{name.replace('_', '-')}"
                    for name, value in ACCELERATED.items())
ALGORITHM_HELP = (f"Which CRC runs. accelerated (recommended): exact diffusion with two local steps per round ({_CHANGES}; "
                  "naive Bayes: three, from each peer's own category counts, its classifier's category counts "
                  "averaged over the rounds): "
                  "the paper's messages, one more statistics vector per peer, peers that agree. paper: Algorithm 2 of "
                  "the paper (uniform start, plain neighbourhood average, one local step per round). Options given "
                  "explicitly win")


def algorithm_option(default: str):
    """``--algorithm accelerated|paper``, whose unset value (None) means ``default`` (a text for --help)."""
    return click.option("--algorithm", type=click.Choice(ALGORITHMS), default=None,
                        help=f"{ALGORITHM_HELP} [default: {default}].")


def acceleration_options() -> dict:
    """``--algorithm``, ``--momentum``, ``--start``, ``--safeguard/--no-safeguard``, ``--classifier`` and
    ``--exact-diffusion/--no-exact-diffusion`` by parameter name.

    Unset options are None; ``crc.core.acceleration.resolve`` resolves them (the algorithm's values)."""
    return {
        "algorithm": algorithm_option(f"{DEFAULT_ALGORITHM}, or paper with an option only the paper's averaging "
                                      "supports: --momentum, --safeguard, --classifier aggregate, --dp-epsilon, "
                                      "--release-every above 1"),
        "momentum": click.option(
            "--momentum", type=FiniteFloatRange(min=0, max=1, max_open=True), default=None,
            help="Heavy-ball memory β through the mixing: a peer calibrates from A(t) + β (A(t) - A(t-1)), A its "
                 "neighbourhood average; no extra messages; not with exact diffusion [default: 0]."),
        "start": click.option(
            "--start", type=click.Choice(STARTS), default=None,
            help="Peers start at uniform(m0) (the paper), at their own ML statistics scaled to ESS m0 (local), or "
                 "at uniform(m0) with the category counts of their own ML statistics (categorical) [default: the "
                 f"algorithm's: {PAPER_SETTINGS['start']}; accelerated naive Bayes {MODEL_SETTINGS['nb']['start']}, "
                 f"region-graph circuit {MODEL_SETTINGS['pc/region-graph']['start']}]."),
        "safeguard": click.option(
            "--safeguard/--no-safeguard", default=None,
            help="Keep a momentum step only if it does not raise the peer's local soft 0-1 loss over the plain "
                 "step, else take the plain step and forget the memory [default: off]."),
        "classifier": click.option(
            "--classifier", type=click.Choice(CLASSIFIERS), default=None,
            help="A peer's classifier after a round: 'local', its statistics after its local calibration step (the "
                 "paper), 'aggregate', its aggregate of the round before that step, which leaves out the step's "
                 "pull towards the peer's own data (no extra messages), or 'averaged', its statistics with the "
                 "category counts averaged over its rounds (weights proportional to the round; one more statistics "
                 "vector, no extra messages) [default: the algorithm's: local; accelerated naive Bayes "
                 f"{MODEL_SETTINGS['nb']['classifier']}]."),
        "exact_diffusion": click.option(
            "--exact-diffusion/--no-exact-diffusion", default=None,
            help="Exact diffusion: a peer mixes half its own statistics with its neighbourhood average and sends its "
                 "calibrated statistics corrected by its previous ones, which removes the disagreement a constant "
                 "local step leaves between peers; one more statistics vector per peer, no extra messages; not "
                 "with --momentum, --safeguard, --classifier aggregate, --dp-epsilon or --release-every above 1 "
                 "[default: the algorithm's: on accelerated, off paper]."),
    }


def loss_option():
    """``--loss P``: each message is lost independently with probability P."""
    return click.option("--loss", type=FiniteFloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True,
                        help="Message loss: each statistics message of a round is dropped independently with this "
                             "probability (seeded); a peer averages what arrived (under exact diffusion from a start "
                             "that is not uniform, with the last heard in place of a lost message).")


def iters_option():
    """``--iters N``: local RC steps per round; unset (None), the algorithm's."""
    return click.option("--iters", type=click.IntRange(min=1), default=None,
                        help=f"Local RC iterations per round [default: the algorithm's: {ACCELERATED['iters']} "
                             f"accelerated ({MODEL_SETTINGS['nb']['iters']} for naive Bayes), "
                             f"{PAPER_SETTINGS['iters']} paper].")
