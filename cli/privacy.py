"""Options of differential privacy and secure aggregation, shared by ``crc simulate``, ``crc launch``, ``crc node`` and ``crc experiment``
(kept light: ``crc node`` imports it)."""

from __future__ import annotations

import click

from crc.cli.finite import FiniteFloatRange
from crc.core.privacy import DEFAULT_CLIP, DEFAULT_DELTA, NOISES
from crc.protocol.rules import SUM_SCOPES


def privacy_options() -> dict:
    """``--dp-epsilon``, ``--dp-delta`` and ``--clip`` by parameter name."""
    return {
        "dp_epsilon": click.option(
            "--dp-epsilon", type=FiniteFloatRange(min=0, min_open=True), default=None,
            help="Differential privacy: every peer adds Gaussian noise to each statistics release (every message and "
                 "its final model) so that all its releases together are (ε, δ)-DP for its local instances; the noise "
                 "is solved for from ε, δ and the run's rounds by the accountant (the privacy loss distribution of the "
                 "composed Gaussians) [default: off, no noise]."),
        "dp_delta": click.option(
            "--dp-delta", type=FiniteFloatRange(min=0, max=1, min_open=True, max_open=True), default=DEFAULT_DELTA,
            show_default=True, help="δ of --dp-epsilon."),
        "clip": click.option(
            "--clip", type=FiniteFloatRange(min=0, min_open=True), default=DEFAULT_CLIP, show_default=True,
            help="With --dp-epsilon: a peer clips its standardized continuous values to [-CLIP, CLIP] before learning; "
                 "the noise grows with CLIP (naive Bayes: about CLIP^2)."),
    }


def release_every_option():
    """``--release-every``: the local step and its release only every K-th round."""
    return click.option(
        "--release-every", type=click.IntRange(min=1), default=1, show_default=True,
        help="A peer takes its local step and releases (with --dp-epsilon, its noisy statistics) only in rounds 1, "
             "K+1, 2K+1, ...; in the rounds between it sends the average of its neighbourhood's last public statistics, "
             "which costs no privacy. The accountant composes ceil(rounds / K) releases, so the same ε needs about √K "
             "less noise per release (results/privacy/releases.md). At most --rounds; local noise only; not with exact "
             "diffusion or the averaged classifier: without --algorithm, a K above 1 chooses the paper's.")


def distributed_noise_options() -> dict:
    """``--dp-noise``, ``--colluders`` and ``--dp-dropouts`` by parameter name (the simulator's)."""
    return {
        "dp_noise": click.option(
            "--dp-noise", type=click.Choice(NOISES), default="local", show_default=True,
            help="With --dp-epsilon: local (every peer noises what it sends) or distributed (with --secure-aggregation "
                 "and --classifier aggregate: every member adds a discrete Gaussian share to its fixed-point "
                 "statistics, so each neighbourhood sum carries the noise once; accounted per distinct neighbourhood "
                 "sum holding a peer)."),
        "dp_colluders": click.option(
            "--colluders", "--dp-colluders", "dp_colluders", type=click.IntRange(min=0), default=0, show_default=True,
            help="With --secure-aggregation: members besides a recipient that may collude with it (vouch for any "
                 "request set, pool what they hold). A member answers only sets of more than (neighbours + t) / 2 "
                 "and at least t + 2 members, and a secret needs t + 1 shares, so every sum unmasked holds two "
                 "honest members; a peer with fewer than t + 2 neighbours cannot be protected (an error). With "
                 "--dp-noise distributed the others' shares still add up to the full noise: every closed "
                 "neighbourhood needs at least t + --dp-dropouts + 2 peers. (--dp-colluders: the same option.)"),
        "dp_dropouts": click.option(
            "--dp-dropouts", type=click.IntRange(min=0), default=0, show_default=True,
            help="With --dp-noise distributed: members a neighbourhood sum may go without (dead, or their statistics "
                 "late) and still be unmasked; the shares are sized so that the others' still add up to the full "
                 "noise beyond the colluders, so every share is larger. With 0 a member missing costs its "
                 "neighbourhood the round (and, if it stays dead, every later one). A request still names a "
                 "majority of a peer's neighbours and two at least, so a ring's sums can go without none (refused)."),
    }


def secure_aggregation_option():
    """``--secure-aggregation``: a peer learns only the sum of its neighbours' statistics."""
    return click.option(
        "--secure-aggregation", is_flag=True, default=False,
        help="Secure aggregation: each neighbour masks its statistics so that a peer with two or more neighbours "
             "learns only their sum (pairwise masks from the peers' keys, Shamir-shared self-masks for dropouts); "
             "statistics to a peer with a single neighbour cannot be hidden and go as they are. Needs keys and "
             "--aggregate mean.")


def sum_over_option():
    """``--sum-over``: what a peer averages each round, its closed neighbourhood or the whole network."""
    return click.option(
        "--sum-over", type=click.Choice(SUM_SCOPES), default=SUM_SCOPES[0], show_default=True,
        help="What a peer averages each round. neighbourhood: itself and its neighbours (the paper's CRC). network: "
             "every peer averages the whole network each round, one secure sum of all peers relayed along a spanning "
             "tree of the graph (needs --secure-aggregation; no --dp-dropouts, --loss or --period).")


NEEDS = {"dp_delta": ("dp_epsilon", None), "clip": ("dp_epsilon", None), "dp_colluders": ("secure_aggregation", True),
         "dp_dropouts": ("dp_noise", "distributed")}
"""The privacy settings that change nothing without another (by parameter name): the other, and the value it needs
(None: any value but None; True: the flag given)."""


def refuse_idle_privacy_settings(ctx: click.Context) -> None:
    """A UsageError for a privacy setting given on the command line that its run would ignore: --dp-delta or --clip
    without --dp-epsilon (no noise, no clipping either), --colluders without --secure-aggregation, --dp-dropouts
    without --dp-noise distributed. (Not for ``crc experiment``, whose privacy table sets --dp-epsilon per column.)"""
    flags = {parameter.name: parameter.opts[0] for parameter in ctx.command.params}
    for name, (other, value) in NEEDS.items():
        given = name in ctx.params and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        if given and (ctx.params.get(other) is None if value is None else ctx.params.get(other) != value):
            needed = flags[other] + (f" {value}" if isinstance(value, str) else "")
            raise click.UsageError(f"{flags[name]} needs {needed}: a run without it ignores {flags[name]}", ctx=ctx)
