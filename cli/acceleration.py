"""Options of accelerated CRC, shared by ``crc simulate``, ``crc launch``, ``crc node`` and ``crc experiment``
(kept light: ``crc node`` imports it)."""

from __future__ import annotations

import click

from crc.core.acceleration import ACCELERATED, CLASSIFIERS, STARTS

_PRESET = ", ".join(f"--{name.replace('_', '-')} {value}" if not isinstance(value, bool) else f"--{name.replace('_', '-')}"
                    for name, value in ACCELERATED.items())


def acceleration_options() -> dict:
    """``--momentum``, ``--start``, ``--safeguard/--no-safeguard``, ``--classifier``,
    ``--exact-diffusion/--no-exact-diffusion`` and ``--accelerated`` by parameter name.

    Unset options are None; ``crc.core.acceleration.with_preset`` resolves them (the preset, else the paper)."""
    return {
        "momentum": click.option(
            "--momentum", type=click.FloatRange(min=0, max=1, max_open=True), default=None,
            help="Heavy-ball memory β through the mixing: a peer calibrates from A(t) + β (A(t) - A(t-1)), A its "
                 "neighbourhood average; no extra messages [default: 0, the paper]."),
        "start": click.option(
            "--start", type=click.Choice(STARTS), default=None,
            help="Peers start at uniform(m0) (the paper) or at their own ML statistics scaled to ESS m0 [default: "
                 "uniform]."),
        "safeguard": click.option(
            "--safeguard/--no-safeguard", default=None,
            help="Keep a momentum step only if it does not raise the peer's local soft 0-1 loss over the plain "
                 "step, else take the plain step and forget the memory [default: off]."),
        "classifier": click.option(
            "--classifier", type=click.Choice(CLASSIFIERS), default=None,
            help="A peer's classifier after a round: 'local', its statistics after its local calibration step (the "
                 "paper), or 'aggregate', its aggregate of the round before that step, which leaves out the step's "
                 "pull towards the peer's own data (no extra messages) [default: local]."),
        "exact_diffusion": click.option(
            "--exact-diffusion/--no-exact-diffusion", default=None,
            help="Exact diffusion: a peer mixes half its own statistics with its neighbourhood average and sends its "
                 "calibrated statistics corrected by its previous ones, which removes the disagreement a constant "
                 "local step leaves between peers; one more statistics vector per peer, no extra messages; not "
                 "with --momentum, --safeguard, --classifier aggregate or --dp-epsilon [default: off; on with --accelerated]."),
        "accelerated": click.option(
            "--accelerated", is_flag=True, default=False,
            help=f"Recommended acceleration preset: {_PRESET} (options given explicitly win)."),
    }


def loss_option():
    """``--loss P``: each message is lost independently with probability P."""
    return click.option("--loss", type=click.FloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True,
                        help="Message loss: each statistics message of a round is dropped independently with this "
                             "probability (seeded); a peer averages what arrived.")


def iters_option(default: int):
    """``--iters N``: local RC steps per round; unset, ``default`` (``ACCELERATED['iters']`` with --accelerated)."""
    return click.option("--iters", type=click.IntRange(min=1), default=None,
                        help=f"Local RC iterations per round [default: {default}; {ACCELERATED['iters']} with --accelerated].")
