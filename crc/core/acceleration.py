"""Accelerated CRC: exact diffusion (with two local steps per round, three for naive Bayes: the default algorithm), a heavy-ball memory
through the mixing, a local start, a per-peer safeguard and the choice of the statistics a peer's classifier is taken
from. ``resolve`` turns a run's settings into one of ``ALGORITHMS`` and its settings.

One round of a peer ``v`` in the paper's algorithm is ``s_v(t) = LRC_v(A_v(t))`` with
``A_v(t) = (M s(t-1))_v``, the average of its closed neighbourhood. With memory β a peer
keeps its previous aggregate ``A_v(t-1)`` and calibrates from

    a_v(t) = A_v(t) + β (A_v(t) - A_v(t-1))

which on a static graph is ``(M[(1+β) s(t-1) - β s(t-2)])_v``: the memory goes through the
mixing, so on a complete graph (where every peer shares one aggregate) CRC with memory is
centralized RC with the same momentum (``crc.core.calibration.rc(momentum=β)``). No extra
message is sent; a peer keeps one more statistics vector (the previous aggregate).

The safeguard (adaptive restart, after O'Donoghue & Candès): a peer also runs LRC from the
plain aggregate and keeps the momentum step only if its local soft 0-1 loss is no higher;
otherwise it keeps the plain step and forgets its memory for the next round. The choice is
per peer and local, so on a complete graph peers may then differ: the identity with RC holds
without the safeguard only.

A peer's classifier after round t is, in the paper, θ(s_v(t)): its statistics after its local step.
That step pulls them towards the peer's own data, which under label drift (a peer holding one class)
is far from the pooled data. With ``classifier = "aggregate"`` the classifier is θ(A_v(t)), the peer's
aggregate of round t before its local step (the memory's plain aggregate, never the pushed one): the
same messages and, with momentum, no extra memory (the aggregate is the memory). On a complete
graph A_v(t) = s(t-1), RC's iterate t-1. With ``classifier = "averaged"`` (naive Bayes' default under the
accelerated algorithm) the classifier is θ(s_v(t)) with its category counts from ``running_average``, the peer's
average of its s_v(1..t) with weights proportional to the round: post-processing of its own states, the same
messages, one more statistics vector per peer.

Exact diffusion (Yuan, Ying, Zhao and Sayed, 2019). With a constant local step the paper's peers never agree:
each is pulled towards its own data, and on a sparse graph that disagreement is most of the gap left at round 64
(the network mean of the aggregates is then already at RC's error). A peer keeps ψ_v, its statistics after its
last local steps, and in round t

    x_v = ½ s_v(t-1) + ½ A_v(t)                 (lazy mixing: the method needs a positive definite mixing)
    x_v = keep_variances(x_v, ψ_v, VARIANCE_KEPT)
    ψ_v ← LRC_v(x_v)
    s_v(t) = ψ_v + x_v - ψ_v(previous)          (what it sends; it also is its classifier)

On a static graph the π-weighted mean of the x_v equals that of the ψ_v in every round (π: the stationary
weights of the mixing), so at a fixed point the peers agree and the π-weighted local steps cancel: the
disagreement of diffusion is gone. No extra message; a peer keeps one more statistics vector (ψ_v). The
correction assumes the same mixing every round: where the simulator draws a new graph, every peer whose
neighbourhood changed restarts at once, as in its first round, with the paper's round: the plain average, one local
step, no correction (where a new graph comes every round, more local steps only pull each peer further towards its
own data). There is no identity with centralized RC (the lazy mixing keeps half of a peer's own statistics even on
a complete graph); what holds is tested instead.

A real peer's neighbourhood changes without a new graph: a neighbour is silent (a partition, a dead peer), marked
down, heard again. The correction cannot stay valid through that on its own: Σ_v (d_v + 1)(s_v - ψ_v), zero from the
first round, is what makes the agreed point the right one, and a round in which one side of a link used the other's
statistics but not the other way round moves it by the two peers' difference; after a long partition the halves
differ much, and two such rounds at the heal made the replay diverge (results/network/partition.md). So a real peer
restarts (the paper's round, every round) while its neighbourhood is unsettled: while some neighbour's statistics
were missing in one of the last ``SETTLE_ROUNDS`` rounds; it resumes exact diffusion once every neighbour has been
heard that many rounds in a row. A peer that joins a running network without memory (started late) takes ψ = its
statistics (``joining_memory``), as one cut off until then. A message the injected ``--loss`` drops restarts nothing,
as in the simulator.

β = 0 without exact diffusion is the paper's algorithm bit for bit (no memory is kept, no extra step is run).
Every function accepts leading batch axes (one per peer), so the simulator runs all peers
at once and a real peer runs the same code on its single row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crc.core.aggregation import NEEDS_PAPER
from crc.core.calibration import lrc
from crc.core.errors import CRCError, OptionConflict
from crc.core.models.base import GenerativeModel

STARTS = ("uniform", "local", "categorical")
"""``uniform``: every peer starts at ``uniform(m0)`` (the paper). ``local``: at the statistics of its own data
(``GenerativeModel.local_start``: the ML statistics; for a circuit one E-step from the shared start) scaled to ESS
``m0`` (on a complete graph with equal local sizes the first average is then the pooled ML statistics, RC's own
start, for a model without hidden variables). ``categorical``: ``uniform``, with the blocks of ``LOCAL_BLOCKS``
taken from ``local``."""

LOCAL_BLOCKS = ("cat",)
"""The blocks of a layout the ``categorical`` start takes from the local start: the category counts of discrete
features. Centralized RC from uniform category counts stays far from RC from the ML counts (a synthetic set of 180
categorical features: test error 0.345 against 0.111 after 64 iterations), and CRC from them kept that (+0.171
above RC at round 64 under exact diffusion, one repeat: results/acceleration/decompose.py), while a peer's ML
counts, though sparse, average towards the pooled ones in the first rounds (+0.011). Gaussian moments stay uniform:
a peer's own class means and variances, of m_v / r instances each, slowed `letter`, `texture` and `spambase`
(results/acceleration.md)."""

CLASSIFIERS = ("local", "aggregate", "averaged")
"""``local``: a peer's classifier is its statistics after its local step (the paper). ``aggregate``: its
aggregate of the last round, before that step. ``averaged``: its statistics after its local step with the blocks of
``LOCAL_BLOCKS`` (the category counts) from the running average of its statistics over its rounds (``running_average``:
weights proportional to the round)."""

ALGORITHMS = ("accelerated", "paper")
"""``accelerated``: the recommended algorithm, the paper's with the changes of ``ACCELERATED``. ``paper``:
Algorithm 2 of the paper (``PAPER_SETTINGS``)."""

DEFAULT_ALGORITHM = "accelerated"
"""What runs unless told otherwise (``resolve``): with the paper's messages it reaches centralized RC's test error on
``letter`` in the paper's default setting, where the paper's algorithm stays about 0.08 above it (results/acceleration.md)."""

ACCELERATED = {"exact_diffusion": True, "iters": 2}
"""What the accelerated algorithm changes in the paper's settings: exact diffusion with two local steps per round
(``iters``, the LRC steps per round, is a setting of the run beside those of ``Acceleration``); a model's
``MODEL_SETTINGS`` change more."""

PAPER_SETTINGS = {"momentum": 0.0, "start": "uniform", "safeguard": False, "classifier": "local",
                  "exact_diffusion": False, "iters": 1}
"""Every setting of ``SETTINGS`` in the paper's algorithm (one plain local step per round)."""

MOMENTUM_PRESET = {"momentum": 0.7, "safeguard": True, "classifier": "aggregate"}
"""The previous preset, on the paper's averaging: heavy-ball memory through the mixing with its safeguard and the
aggregate classifier; the better choice where the graph is redrawn every round or two (results/acceleration.md)."""

VARIANCE_KEPT = 0.8
"""Exact diffusion: a peer's mixed statistics keep at least this fraction of every variance of its last locally
calibrated statistics (``GenerativeModel.keep_variances``); without it `spambase` diverged. For QDA, every class
covariance at least this fraction of the last calibrated one in the positive semi-definite order: without it `letter`
QDA ended at a test error of 0.345 against RC's 0.133 (peers' covariances non-PSD, floored to near-singular ones);
with it 0.168, 0.149, 0.156 on three repeats against RC's 0.133, 0.126, 0.136 (docs/explanation/algorithm.md). For
the circuits, every leaf's variance and category count (``NaiveBayes.keep_leaves``)."""

SETTLE_ROUNDS = 16
"""A real peer resumes exact diffusion's correction once every neighbour's statistics have arrived this many rounds
in a row (module notes). The network bench's partition (30 s, healed 80 to 150 rounds before the end), test gap over
the wan run's, with naive Bayes' two local steps a round then: with 16, +0.0046, -0.0070 and -0.0081; with 8,
+0.0022, +0.0027, +0.0087, and +0.027 in a run at load average 15; with 4, +0.076 (the heal's churn, stale frames
flushed, timeouts, neighbours marked down again, outlasts 4 rounds). With the three steps naive Bayes runs now, 16
rounds: +0.0042, +0.0022 and -0.0065 (results/network/network.md). The replay in the simulator agrees on 4
against 8 and 16 (results/network/partition.md)."""

MODEL_SETTINGS = {"nb": {"start": "categorical", "iters": 3, "classifier": "averaged"}, "pc/region-graph": {"start": "local"}}
"""What the accelerated algorithm changes further for a model (``resolve``, key ``model_key``): the region-graph
circuit starts local (``RegionGraphCircuit.local_start``: one E-step of each peer's data from the shared start).
Centralized RC from its uniform start ends far from RC from the ML statistics (``letter`` 0.309 against 0.227,
``penbased`` 0.079 against 0.035), and CRC from it kept most of that (``letter``: gap +0.030 over three repeats,
+0.014 from the local start). The mixture circuit keeps the uniform start (with the circuits' leaf rule,
``NaiveBayes.keep_leaves``: ``satimage`` +0.008 uniform, +0.019 local; ``optdigits`` −0.032, +0.012 on its first
repeat; ``letter`` alone is better local, +0.006 against +0.012 uniform), and so does QDA (QDA's local start
under exact diffusion diverged on one of three ``letter`` repeats, 0.370 test error). The region graph's figures
predate its leaf rule, without which the local start diverged on ``texture``; with it both circuits end within 0.02
of RC on all ten sets of the circuits table (results/models/gaps.md). Figures and commands:
docs/explanation/algorithm.md. Naive Bayes starts from its local category counts (``LOCAL_BLOCKS``) and takes three
local steps (issue 31; default setting, 3 repeats: gap <= 0.01 at round 64 on 15 of the 15 bundled sets, at round
32 on 13, against 14 and 9 with the uniform start and two steps; results/acceleration.md); its classifier takes
the category counts from their running average over the rounds (``running_average``: on the categorical synthetic
set +0.020 -> -0.002 at round 64, 3 repeats; results/acceleration/suffix.py)."""


def model_key(model: str | None, structure: str | None = None) -> str | None:
    """The key of ``MODEL_SETTINGS`` of a model kind (``nb``, ``qda``, ``pc``) and its circuit structure."""
    return None if model is None else f"{model}/{structure}" if model == "pc" and structure else model


SETTINGS = tuple(PAPER_SETTINGS)
"""The settings an algorithm fixes: those of ``Acceleration``, and ``iters``."""


def algorithm_settings(algorithm: str, model: str | None = None) -> dict:
    """Every setting of ``SETTINGS`` under ``algorithm`` (one of ``ALGORITHMS``) for ``model`` (a ``model_key``;
    ``MODEL_SETTINGS`` apply to the accelerated algorithm only)."""
    if algorithm not in ALGORITHMS:
        raise CRCError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if algorithm == "paper":
        return dict(PAPER_SETTINGS)
    return {**PAPER_SETTINGS, **ACCELERATED, **MODEL_SETTINGS.get(model, {})}


def paper_only(settings: dict) -> str | None:
    """The first option set in ``settings`` that only the paper's averaging supports (exact diffusion excludes it),
    as the command line spells it, or None. ``dp_epsilon`` counts: the privacy accountant covers one plain local
    step per round. So does a vote (``crc.core.aggregation.NEEDS_PAPER``): exact diffusion's correction assumes the
    closed-neighbourhood mean on honest inputs (on a ring of 6 with a chord, penbased, clean: 0.916 accuracy with the
    mean, 0.827 with the geometric median under exact diffusion, 0.891 with it under the paper's averaging);
    ``screened`` (``robust``) is the mean where it leaves nothing out, and runs under either. So does
    ``release_every`` above 1 (``crc.protocol.rules.check_release_every``): exact diffusion's correction resends the
    previous round's local step, which a round that only averages does not take."""
    aggregate = settings.get("aggregate")
    for option, given in ((f"--aggregate {aggregate}", aggregate in NEEDS_PAPER),
                          ("--momentum", (settings.get("momentum") or 0.0) > 0.0),
                          ("--safeguard", bool(settings.get("safeguard"))),
                          ("--classifier aggregate", settings.get("classifier") == "aggregate"),
                          ("--dp-epsilon", settings.get("dp_epsilon") is not None),
                          ("--release-every", (settings.get("release_every") or 1) > 1)):
        if given:
            return option
    return None


def resolve(settings: dict) -> dict:
    """``settings`` with its ``algorithm`` and every setting of ``SETTINGS`` set.

    The algorithm is the one given, else ``DEFAULT_ALGORITHM``, or ``paper`` when an option needs the paper's
    averaging (``paper_only``). A setting of ``SETTINGS`` that is absent or None takes the algorithm's value; one
    given explicitly wins (``Acceleration`` refuses the combinations that make no sense). A ``model`` (its kind)
    and ``structure`` in ``settings`` add its ``MODEL_SETTINGS``; they are not part of the result."""
    settings = dict(settings)
    model = model_key(settings.pop("model", None), settings.pop("structure", None))
    algorithm = settings.get("algorithm") or ("paper" if paper_only(settings) else DEFAULT_ALGORITHM)
    for name, value in algorithm_settings(algorithm, model).items():
        if settings.get(name) is None:
            settings[name] = value
    settings["algorithm"] = algorithm
    return settings


def describe(settings: dict) -> str:
    """One line naming resolved ``settings``' algorithm and what it runs, e.g. ``accelerated: exact diffusion, 2
    local steps per round``."""
    parts = ["exact diffusion"] if settings["exact_diffusion"] else []
    if settings["momentum"] or settings["safeguard"]:
        parts.append(f"momentum {settings['momentum']:g}" + (" with safeguard" if settings["safeguard"] else ""))
    parts += [f"{settings['start']} start"] if settings["start"] != PAPER_SETTINGS["start"] else []
    parts += [{"aggregate": "classifier from the last aggregate",
               "averaged": "averaged category counts"}[settings["classifier"]]
              ] if settings["classifier"] != PAPER_SETTINGS["classifier"] else []
    parts.append(f"{settings['iters']} local step{'s' if settings['iters'] != 1 else ''} per round")
    return f"{settings['algorithm']}: {', '.join(parts)}"


@dataclass(frozen=True)
class Acceleration:
    """How a peer moves from its aggregate to its next statistics.

    Attributes
    ----------
    momentum : float
        β in [0, 1): weight of the memory term; 0 is the paper's algorithm.
    start : str
        One of ``STARTS``.
    safeguard : bool
        Keep a momentum step only if it does not raise the local soft 0-1 loss (see the module notes).
    classifier : str
        One of ``CLASSIFIERS``.
    exact_diffusion : bool
        Exact diffusion instead of the paper's averaging (see the module notes); not with momentum, the safeguard or
        the aggregate classifier.
    """

    momentum: float = 0.0
    start: str = "uniform"
    safeguard: bool = False
    classifier: str = "local"
    exact_diffusion: bool = False

    def __post_init__(self):
        if not 0.0 <= self.momentum < 1.0:
            raise CRCError(f"--momentum must be in [0, 1), got {self.momentum}")
        if self.start not in STARTS:
            raise CRCError(f"--start must be one of {', '.join(STARTS)}, got {self.start!r}")
        if self.classifier not in CLASSIFIERS:
            raise CRCError(f"--classifier must be one of {', '.join(CLASSIFIERS)}, got {self.classifier!r}")
        if self.exact_diffusion:
            for clash, option in ((self.momentum > 0, "--momentum"), (self.safeguard, "--safeguard"),
                                  (self.classifier == "aggregate", "--classifier aggregate")):
                if clash:
                    raise OptionConflict(f"--exact-diffusion (part of --algorithm accelerated) cannot be combined with "
                                         f"{option}: exact diffusion corrects the averaging itself, and its statistics "
                                         f"are its classifier; for {option} use --algorithm paper")

    @property
    def has_momentum(self) -> bool:
        return self.momentum > 0.0

    @property
    def keeps_memory(self) -> bool:
        """Whether ``step`` returns a ``Memory`` for the next round (momentum or exact diffusion)."""
        return self.has_momentum or self.exact_diffusion

    @property
    def keeps_aggregate(self) -> bool:
        """Whether a peer keeps its last aggregate between rounds: it is the classifier, or the momentum's memory."""
        return self.classifier == "aggregate" or self.has_momentum

    @property
    def keeps_average(self) -> bool:
        """Whether a peer keeps the running average of its statistics (``running_average``): it is its classifier's."""
        return self.classifier == "averaged"


PAPER = Acceleration()
"""No memory, uniform start, no safeguard, the local classifier: Algorithm 2 of the paper."""

PRESET = Acceleration(**{name: value for name, value in ACCELERATED.items() if name in Acceleration.__dataclass_fields__})
"""The acceleration settings of the accelerated algorithm (its ``iters`` apart)."""


def acceleration_of(settings: dict) -> Acceleration:
    """The ``Acceleration`` of resolved ``settings`` (``resolve``); their other entries are ignored."""
    return Acceleration(**{name: settings[name] for name in Acceleration.__dataclass_fields__})


@dataclass
class Memory:
    """A peer's (or every peer's) state between rounds beyond its statistics.

    Attributes
    ----------
    previous : ndarray of shape (..., size)
        With momentum, the aggregate of the previous round; with exact diffusion, the statistics after the
        previous round's local steps (ψ).
    reset : ndarray of shape (...), bool
        Peers whose next round takes the plain step (the safeguard rejected their momentum step); with exact
        diffusion always false.
    """

    previous: np.ndarray
    reset: np.ndarray


def joining_memory(acceleration: Acceleration, stats: np.ndarray) -> Memory | None:
    """The memory of a peer without one that joins a running network with statistics ``stats`` (size,): with exact
    diffusion ψ = ``stats`` (its s - ψ is zero, as that of a peer cut off since its start), so that its first round is
    exact diffusion's and keeps Σ (d + 1)(s - ψ) (module notes); None otherwise."""
    if not acceleration.exact_diffusion:
        return None
    return Memory(stats.copy(), np.zeros(stats.shape[:-1], dtype=bool))


def keeps_last_heard(model: GenerativeModel, acceleration: Acceleration) -> bool:
    """Whether a peer replaces a lost message (injected message loss) by the last statistics it heard from that
    neighbour, instead of averaging only what arrived: under exact diffusion from a start that is not uniform
    (``local``, or ``categorical`` with a block of ``LOCAL_BLOCKS``). Such a start's category counts persist (RC has a
    continuum of fixed points in them) and averaging only what arrived lets the network's counts drift: message loss
    p = 0.3, gap at round 64 over 3 repeats, splice +0.193 averaging what arrived, +0.008 with the last heard (uniform
    start: +0.018; chess +0.030 and optdigits +0.025 stay above its -0.002 and -0.014). From the uniform start the
    last heard slowed exact diffusion instead (one repeat: letter +0.031 -> +0.119, spambase +0.008 -> +0.040), so
    it keeps averaging what arrived (results/acceleration/findings.md)."""
    if not acceleration.exact_diffusion or acceleration.start == "uniform":
        return False
    return acceleration.start == "local" or any(name in LOCAL_BLOCKS and width > 0 for name, width in model.layout.blocks)


def start_statistics(model: GenerativeModel, acceleration: Acceleration, ess: float, phi: np.ndarray, y: np.ndarray,
                     mask: np.ndarray | None = None) -> np.ndarray:
    """Every peer's starting statistics (..., size) of ESS ``ess``, from local feature maps ``phi`` (..., m, k),
    labels ``y`` (..., m) and padding ``mask`` (..., m)."""
    uniform = np.broadcast_to(model.uniform(ess), y.shape[:-1] + (model.size,)).copy()
    if acceleration.start == "uniform":
        return uniform
    local = model.local_start(phi, y, mask=mask)
    local = local * (ess / model.ess(local))[..., None]
    if acceleration.start == "local":
        return local
    return with_local_blocks(model, uniform, local)


def with_local_blocks(model: GenerativeModel, stats: np.ndarray, source: np.ndarray) -> np.ndarray:
    """``stats`` (..., size), changed in place, with the blocks of ``LOCAL_BLOCKS`` taken from ``source`` (..., size)."""
    table, source_table = model.table(stats), model.table(source)
    for name, _ in model.layout.blocks:
        if name in LOCAL_BLOCKS:
            table[..., model.layout.columns(name)] = source_table[..., model.layout.columns(name)]
    return stats


def running_average(average: np.ndarray | None, stats: np.ndarray, round_: int) -> np.ndarray:
    """The average (..., size) of a peer's statistics over its rounds 1..``round_`` with weights proportional to the
    round, updated by its statistics ``stats`` (..., size) of round ``round_`` (polynomial-decay averaging with η = 1,
    Shamir and Zhang, 2013): ``(1 - w) average + w stats``, w = 2 / (round_ + 1); ``stats`` itself without an
    ``average`` (the first round, or a peer that has none). A new array.

    Why (issue 31): from its own category counts (the ``categorical`` start) a peer's counts differ from the network
    mean's in the mixing's slow modes, which a random tree keeps for hundreds of rounds; but that difference turns
    from round to round, so its average over the rounds is smaller: on the categorical synthetic set (180 features of
    4 values, repeat 0) the peers' spread around the network mean at round 64 is 1.8 times that of the averaged
    counts, and the test gap to RC over 3 repeats +0.020 with the counts of round 64, -0.002 with the averaged ones
    (results/acceleration/suffix.py). The weights leave out the early rounds, still far from RC: a plain average of
    every round was worse at round 32 on ``chess`` (+0.007 against -0.001)."""
    if average is None:
        return stats.copy()
    weight = 2.0 / (round_ + 1)
    return (1.0 - weight) * average + weight * stats


def classifier_statistics(model: GenerativeModel, acceleration: Acceleration, stats: np.ndarray,
                          aggregated: np.ndarray | None, average: np.ndarray | None) -> np.ndarray:
    """What a peer's classifier is taken from (..., size): ``stats`` after the local step; with ``aggregate`` the
    round's ``aggregated`` statistics; with ``averaged`` ``stats`` with the category counts of the running ``average``
    (a new array). Before the first round (no aggregate, no average yet) ``stats``."""
    if acceleration.classifier == "aggregate" and aggregated is not None:
        return aggregated
    if acceleration.classifier == "averaged" and average is not None:
        return with_local_blocks(model, stats.copy(), average)
    return stats


def local_soft_loss(model: GenerativeModel, stats: np.ndarray, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each peer's soft 0-1 loss ``1 - mean p(y|x)`` on its own data, shape (...)."""
    posteriors = model.posteriors(model.theta(stats), phi)
    correct = (posteriors * weights).sum(axis=(-1, -2))
    return 1.0 - correct / weights.sum(axis=(-1, -2))


def step(model: GenerativeModel, acceleration: Acceleration, aggregated: np.ndarray, memory: Memory | None,
         phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None = None, *,
         iterations: int = 1, own: np.ndarray | None = None,
         restart: np.ndarray | None = None) -> tuple[np.ndarray, Memory | None]:
    """One round after the averaging: ``(statistics (..., size), memory for the next round)``.

    ``aggregated`` (..., size) is the closed-neighbourhood average of the round; ``memory`` is
    what the previous call returned (None in the first round, or after a resume without it). With momentum the
    returned memory holds ``aggregated`` itself (no copy: a peer keeps two statistics vectors, not three), so the
    caller must not change it afterwards.
    ``phi``, ``weights`` and ``mask`` are as ``crc.core.calibration.lrc`` takes them. Exact diffusion also needs
    ``own`` (..., size), the statistics each peer sent in the previous round, and takes ``restart`` (...), bool,
    the peers whose neighbourhood changed since the previous round (default: none).
    """
    if acceleration.exact_diffusion:
        if own is None:
            raise CRCError("exact diffusion needs the peers' own statistics")
        return _exact_diffusion(model, own, aggregated, memory, phi, weights, mask, iterations, restart)
    if not acceleration.keeps_memory:
        return lrc(model, aggregated, phi, weights, mask, iterations=iterations), None
    if memory is None:
        stats = lrc(model, aggregated, phi, weights, mask, iterations=iterations)
        return stats, Memory(aggregated, np.zeros(aggregated.shape[:-1], dtype=bool))
    pushed = np.where(memory.reset[..., None], aggregated, aggregated + acceleration.momentum * (aggregated - memory.previous))
    stats = lrc(model, pushed, phi, weights, mask, iterations=iterations)
    reset = np.zeros(aggregated.shape[:-1], dtype=bool)
    if acceleration.safeguard:
        plain = lrc(model, aggregated, phi, weights, mask, iterations=iterations)
        reset = local_soft_loss(model, stats, phi, weights) > local_soft_loss(model, plain, phi, weights)
        stats = np.where(reset[..., None], plain, stats)
    return stats, Memory(aggregated, reset)


def _exact_diffusion(model: GenerativeModel, own: np.ndarray, aggregated: np.ndarray, memory: Memory | None,
                     phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None, iterations: int,
                     restart: np.ndarray | None) -> tuple[np.ndarray, Memory]:
    """``step`` with exact diffusion (module notes). A restarting peer (and every peer without memory) takes the
    paper's round: the plain average and one local step, sent uncorrected."""
    batch = aggregated.shape[:-1]
    restart = np.ones(batch, dtype=bool) if memory is None else np.zeros(batch, dtype=bool) if restart is None else restart
    mixed = np.where(restart[..., None], aggregated, 0.5 * (own + aggregated))
    if memory is not None:
        mixed = model.keep_variances(mixed, memory.previous, VARIANCE_KEPT)
    calibrated = lrc(model, mixed, phi, weights, mask)
    if iterations > 1 and not restart.all():
        calibrated = np.where(restart[..., None], calibrated, lrc(model, calibrated, phi, weights, mask, iterations=iterations - 1))
    sent = calibrated if memory is None else np.where(restart[..., None], calibrated, calibrated + mixed - memory.previous)
    return sent, Memory(calibrated, np.zeros(batch, dtype=bool))
