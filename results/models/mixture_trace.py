"""The rounds of one repeat of the mixture circuit (K=2) under the accelerated algorithm, shared by
mixture_variances.py and mixture_categories.py."""

import math
from collections.abc import Iterator

from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import load_for, prepare_repeat
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory


def every_rounds(data: str, rounds: int, repeat: int, every: int) -> Iterator[tuple[int, object, object]]:
    """(round, repeat, engine) every ``every`` rounds of ``rounds``: the default setting's repeat ``repeat``."""
    config = SimulationConfig.from_settings(data=data, model="pc", rc_converged=False, rounds=rounds)
    rep = prepare_repeat(load_for(config), config, repeat)
    engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
    for r in range(1, rounds + 1):
        engine.step()
        if r % every == 0:
            yield r, rep, engine
