"""Issue 32: the paper's algorithm and naive Bayes under the default algorithm are bit-identical to the code before the
issue (commit b02faf8). Run it once with PYTHONPATH at an export of b02faf8 (git archive b02faf8 | tar -x -C DIR) and
once from this tree, each writing an .npz of the final statistics, and compare them with numpy.array_equal: all six
were identical (results/models/gaps.md)."""
import sys, math, numpy as np
from crc.protocol.config import SimulationConfig
from crc.protocol.repeat import prepare_repeat, load_for
from crc.protocol.simulator import make_engine
from crc.topologies import network_factory
import crc; print(crc.__file__)
out = {}
for data, model, algo, extra in [("letter", "nb", "accelerated", {}), ("satimage", "nb", "accelerated", {}), ("magic", "nb", "accelerated", {}),
                                 ("letter", "qda", "paper", {}), ("letter", "pc", "paper", {}), ("letter", "pc", "paper", {"structure": "region-graph"})]:
    config = SimulationConfig.from_settings(data=data, model=model, algorithm=algo, rc_converged=False, **extra)
    rep = prepare_repeat(load_for(config), config, 0)
    engine, _ = make_engine(rep, config, network_factory(config.topology, math.inf))
    out[f"{data}-{model}{extra.get('structure','')}-{algo}"] = engine.run(config.rounds)
np.savez(sys.argv[1], **out)
