"""Options of accelerated CRC, shared by ``crc simulate``, ``crc launch``, ``crc node`` and ``crc experiment``
(kept light: ``crc node`` imports it)."""

from __future__ import annotations

import click

from crc.core.acceleration import ACCELERATED, CLASSIFIERS, STARTS

_PRESET = ", ".join(f"--{name} {value}" if not isinstance(value, bool) else f"--{name}" for name, value in ACCELERATED.items())


def acceleration_options() -> dict:
    """``--momentum``, ``--start``, ``--safeguard/--no-safeguard``, ``--classifier`` and ``--accelerated`` by
    parameter name.

    Unset options are None; ``crc.core.acceleration.with_preset`` resolves them (the preset, else the paper)."""
    return {
        "momentum": click.option(
            "--momentum", type=click.FloatRange(min=0, max=1, max_open=True), default=None,
            help="Heavy-ball memory β through the mixing: a peer calibrates from A(t) + β (A(t) - A(t-1)), A its "
                 f"neighbourhood average; no extra messages [default: 0, the paper; {ACCELERATED['momentum']} with --accelerated]."),
        "start": click.option(
            "--start", type=click.Choice(STARTS), default=None,
            help="Peers start at uniform(m0) (the paper) or at their own ML statistics scaled to ESS m0 [default: "
                 f"uniform; {ACCELERATED['start']} with --accelerated]."),
        "safeguard": click.option(
            "--safeguard/--no-safeguard", default=None,
            help="Keep a momentum step only if it does not raise the peer's local soft 0-1 loss over the plain "
                 "step, else take the plain step and forget the memory [default: off; on with --accelerated]."),
        "classifier": click.option(
            "--classifier", type=click.Choice(CLASSIFIERS), default=None,
            help="A peer's classifier after a round: 'local', its statistics after its local calibration step (the "
                 "paper), or 'aggregate', its aggregate of the round before that step, which leaves out the step's "
                 "pull towards the peer's own data (no extra messages) [default: local; "
                 f"{ACCELERATED['classifier']} with --accelerated]."),
        "accelerated": click.option(
            "--accelerated", is_flag=True, default=False,
            help=f"Recommended acceleration preset: {_PRESET} (options given explicitly win)."),
    }


def loss_option():
    """``--loss P``: each message is lost independently with probability P."""
    return click.option("--loss", type=click.FloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True,
                        help="Message loss: each statistics message of a round is dropped independently with this "
                             "probability (seeded); a peer averages what arrived.")
