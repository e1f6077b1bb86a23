"""The configuration of one experiment, shared by the simulator, real launches and the experiment grids."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from crc.core.acceleration import SETTINGS, Acceleration, acceleration_of, resolve
from crc.core.aggregation import AGGREGATIONS, VOTES
from crc.core.attacks import ATTACKS
from crc.core.calibration import DEFAULT_ITERATIONS, DEFAULT_LR
from crc.core.distributed_noise import Neighbourhoods
from crc.core.errors import CRCError, OptionConflict
from crc.core.feature_partition import FeaturePartition, is_feature_partition, parse_feature_partition
from crc.core.models import all_options, model_options
from crc.core.partition import PARTITIONS
from crc.core.privacy import DEFAULT_CLIP, DEFAULT_DELTA, Privacy, check_settings
from crc.protocol.rules import MAX_ROUNDS, check_release_every, check_secure_aggregation, check_sum_over

DEFAULT_EVAL_NODES = 1000
DEFAULT_EVAL_INSTANCES = 20_000


@dataclass(frozen=True)
class SimulationConfig:
    """Options of one experiment; the names are those of the results JSON's ``config``.

    ``algorithm`` is ``accelerated`` or ``paper`` (``crc.core.acceleration.ALGORITHMS``); None chooses as
    ``crc.core.acceleration.resolve`` says (the accelerated algorithm, unless an option needs the paper's). The
    settings of the algorithm (``iters``, ``momentum``, ``start``, ``safeguard``, ``classifier``,
    ``exact_diffusion``) left None take its values; after construction none is None.

    ``model_options`` holds the model's structure options (see ``crc.core.models``);
    it is completed with the declared defaults and checked on construction. Use
    ``from_settings`` to build a configuration from flat settings as commands and
    grids write them (``components=4`` beside ``nodes=50``).
    """

    data: str = "letter"
    label: str | None = None
    categorical: tuple = ()
    """A CSV file's feature columns read as categorical whatever their values (else the paper's rule)."""
    model: str = "nb"
    model_options: dict = field(default_factory=dict)
    topology: str = "tree"
    period: int | None = None
    nodes: int = 50
    local_size: int = 50
    pooled_size: int | None = None
    partition: str = "iid"
    feature_blocks: tuple | None = None
    """Vertical and hybrid partitions: each block's feature names (default: a seeded cut)."""
    alpha: float = 1.0
    size_skew: float = 0.0
    rounds: int = 64
    rc_iterations: int = DEFAULT_ITERATIONS
    rc_converged: bool = True
    algorithm: str | None = None
    iters: int | None = None
    momentum: float | None = None
    start: str | None = None
    safeguard: bool | None = None
    classifier: str | None = None
    exact_diffusion: bool | None = None
    loss: float = 0.0
    dp_epsilon: float | None = None
    dp_delta: float = DEFAULT_DELTA
    clip: float = DEFAULT_CLIP
    dp_noise: str = "local"
    dp_colluders: int = 0
    dp_dropouts: int = 0
    release_every: int = 1
    secure_aggregation: bool = False
    sum_over: str = "neighbourhood"
    """What a peer averages each round (``crc.protocol.rules.SUM_SCOPES``): its closed neighbourhood, or the whole
    network, one secure sum of all peers (``crc.protocol.network_sum``); results written before it mean the first."""
    lr: float = DEFAULT_LR
    ess: float | None = None
    test_size: float = 0.25
    seed: int = 0
    repeats: int = 1
    curve: bool = False
    baseline: bool = False
    aggregate: str = "mean"
    byzantine: int = 0
    attack: str = "permute"
    eval_nodes: int = DEFAULT_EVAL_NODES
    eval_instances: int = DEFAULT_EVAL_INSTANCES

    def __post_init__(self):
        object.__setattr__(self, "model_options", model_options(self.model, self.model_options))
        chosen = resolve({**{name: getattr(self, name) for name in ("algorithm", *SETTINGS, "dp_epsilon", "release_every",
                                                                  "aggregate", "model")},
                          "structure": self.model_options.get("structure")})
        for name in ("algorithm", *SETTINGS):
            object.__setattr__(self, name, chosen[name])
        if self.feature_blocks is not None:
            object.__setattr__(self, "feature_blocks", tuple(tuple(block) for block in self.feature_blocks))
        object.__setattr__(self, "categorical", tuple(self.categorical))

    @classmethod
    def from_settings(cls, **settings) -> SimulationConfig:
        """A configuration from flat settings: configuration fields and any model's options by name.

        Options of other models than ``model`` are ignored; an unknown name is a CRCError. Settings of the algorithm
        that are None take the algorithm's values.
        """
        names = {f.name for f in fields(cls)} - {"model_options"}
        option_names = {option.name for option in all_options()}
        unknown = sorted(set(settings) - names - option_names)
        if unknown:
            raise CRCError(f"unknown setting(s) {', '.join(unknown)}")
        options = {key: value for key, value in settings.items() if key in option_names}
        return cls(**{key: value for key, value in settings.items() if key in names}, model_options=options)

    def with_settings(self, **settings) -> SimulationConfig:
        """A copy with some flat settings changed (as ``from_settings`` takes them). The settings of this
        configuration's algorithm are kept as they are: to change the algorithm, build a new configuration."""
        return SimulationConfig.from_settings(**{**self.to_json(), **settings})

    def to_json(self) -> dict:
        """Flat JSON object: every field, with the model's options in place of ``model_options``."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "model_options":
                out.update(value)
            elif f.name == "feature_blocks" and value is not None:
                out[f.name] = [list(block) for block in value]
            elif f.name == "categorical":
                out[f.name] = list(value)
            else:
                out[f.name] = value
        return out

    def validate(self) -> None:
        """A CRCError naming the first option out of range, an OptionConflict the first options that cannot go
        together."""
        checks = [
            (self.nodes >= 1, f"--nodes must be at least 1, got {self.nodes}"),
            (self.local_size >= 1, f"--local-size must be at least 1, got {self.local_size}"),
            (self.pooled_size is None or self.pooled_size >= self.nodes or is_feature_partition(self.partition),
             f"--train-size {self.pooled_size} leaves some of the {self.nodes} nodes without data"),  # groups: resolve_partition
            (self.partition in PARTITIONS or is_feature_partition(self.partition),
             f"--partition must be one of {', '.join(PARTITIONS)}, vertical[:K] or hybrid[:GxK], got {self.partition!r}"),
            (self.alpha > 0 and math.isfinite(self.alpha), f"--alpha must be a positive number, got {self.alpha}"),
            (self.size_skew >= 0 and math.isfinite(self.size_skew), f"--size-skew must be >= 0, got {self.size_skew}"),
            (1 <= self.rounds <= MAX_ROUNDS, f"--rounds must be between 1 and {MAX_ROUNDS}, got {self.rounds}"),
            (self.release_every >= 1, f"--release-every must be at least 1, got {self.release_every}"),
            (self.rc_iterations >= 0, f"--rc-iterations must be at least 0, got {self.rc_iterations}"),
            (self.iters >= 1, f"--iters must be at least 1, got {self.iters}"),
            (0 <= self.loss < 1, f"--loss must be in [0, 1), got {self.loss}"),
            (self.lr > 0 and math.isfinite(self.lr), f"--lr must be a positive number, got {self.lr}"),
            (self.ess is None or (self.ess > 0 and math.isfinite(self.ess)), f"--ess must be positive, got {self.ess}"),
            (self.test_size > 0 and math.isfinite(self.test_size), f"--test-size must be positive, got {self.test_size}"),
            (self.repeats >= 1, f"--repeats must be at least 1, got {self.repeats}"),
            (self.seed >= 0, f"--seed must be at least 0, got {self.seed}"),
            (self.period is None or self.period >= 1, f"--period must be at least 1, got {self.period}"),
            (self.aggregate in AGGREGATIONS, f"--aggregate must be one of {', '.join(AGGREGATIONS)}, got {self.aggregate!r}"),
            (self.attack in ATTACKS, f"--attack must be one of {', '.join(ATTACKS)}, got {self.attack!r}"),
            (self.eval_nodes >= 1 and self.eval_instances >= 1, "evaluation sample sizes must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise CRCError(message)
        if not 0 <= self.byzantine < self.nodes:
            raise OptionConflict(f"--byzantine must be from 0 to nodes - 1 = {self.nodes - 1}, got {self.byzantine}")
        check_secure_aggregation(secure_aggregation=self.secure_aggregation, aggregate=self.aggregate, dp_noise=self.dp_noise)
        check_sum_over(self.sum_over, secure_aggregation=self.secure_aggregation, dp_dropouts=self.dp_dropouts,
                       dynamic=self.period is not None, loss=self.loss)
        acceleration = self.acceleration  # checks --momentum, --start, --classifier and --exact-diffusion
        partition = self.feature_partition
        check_release_every(release_every=self.release_every, rounds=self.rounds, exact_diffusion=self.exact_diffusion,
                            dp_noise=self.dp_noise, averaged=acceleration.keeps_average, vertical=partition is not None)
        if self.feature_blocks is not None and partition is None:
            raise OptionConflict("--blocks needs a vertical or hybrid --partition")
        if partition is not None:
            if self.byzantine:
                raise OptionConflict("--byzantine is not available with a vertical or hybrid partition")
            if self.dp_epsilon is not None:
                raise OptionConflict("--dp-epsilon is not available with a vertical or hybrid partition: the noise and "
                                     "its accountant are for the statistics of horizontal peers")
            if self.dp_colluders:
                raise OptionConflict("--colluders is not available with a vertical or hybrid partition: it sets the "
                                     "request sets of horizontal secure aggregation")
            if self.sum_over != "neighbourhood":
                raise OptionConflict(f"--sum-over {self.sum_over} is not available with a vertical or hybrid partition: "
                                     "it sums the statistics of horizontal peers")
            if partition.groups == 1 and self.loss > 0:
                raise OptionConflict(f"--loss is not simulated with --partition {partition.spec}: its one group sends no "
                                     "statistics to another, and its members' messages are not dropped")
            if self.aggregate in VOTES:
                raise OptionConflict(f"--aggregate {self.aggregate} is not available with a vertical or hybrid partition: "
                                     "the votes need the class counts' place in a peer's statistics, which a block's "
                                     "statistics do not have")
        check_settings(epsilon=self.dp_epsilon, delta=self.dp_delta, clip=self.clip, iterations=self.iters,
                       acceleration=acceleration, noise=self.dp_noise, colluders=self.dp_colluders,
                       dropouts=self.dp_dropouts, aggregate=self.aggregate)
        if self.dp_noise == "distributed" and (self.loss > 0 or self.period is not None or self.byzantine):
            raise OptionConflict("--dp-noise distributed is not simulated with --loss, --period or --byzantine: its "
                                 "shares are sized for one static graph whose messages all arrive")

    def privacy(self, model, mixing=None) -> Privacy | None:
        """The noise every peer of ``model`` adds to its releases (one every ``release_every`` rounds), None without
        ``dp_epsilon``;
        distributed noise (``dp_noise``) sizes it for the sums of ``sums(mixing)``."""
        if self.dp_epsilon is None:
            return None
        from crc.protocol.accountant import plan, plan_distributed

        if self.dp_noise == "distributed":
            return plan_distributed(model, epsilon=self.dp_epsilon, delta=self.dp_delta, clip=self.clip, rounds=self.rounds,
                                    neighbourhoods=self.sums(mixing), colluders=self.dp_colluders,
                                    dropouts=self.dp_dropouts)
        return plan(model, epsilon=self.dp_epsilon, delta=self.dp_delta, clip=self.clip, rounds=self.rounds,
                    release_every=self.release_every)

    def sums(self, mixing) -> Neighbourhoods:
        """The sums that carry distributed noise each round: with ``sum_over`` network one of all peers
        (``Neighbourhoods.whole``), else the closed neighbourhoods of the averaging matrix ``mixing`` (n, n)
        (``Neighbourhoods.of``, one sum per recipient with ``dp_dropouts``)."""
        if self.sum_over == "network":
            return Neighbourhoods.whole(self.nodes)
        return Neighbourhoods.of(mixing, self.dp_dropouts)

    @property
    def feature_partition(self) -> FeaturePartition | None:
        """The vertical or hybrid partition (``crc.core.feature_partition``), None for a horizontal one."""
        return parse_feature_partition(self.partition) if is_feature_partition(self.partition) else None

    @property
    def acceleration(self) -> Acceleration:
        """The peers' memory, start, safeguard, classifier and exact diffusion (``crc.core.acceleration``)."""
        return acceleration_of(self.to_json())

    @property
    def train_size(self) -> int:
        """Size m of the pooled training set: ``pooled_size`` if set (fragmentation), else n x m_v."""
        return self.pooled_size if self.pooled_size is not None else self.nodes * self.local_size
