"""Where differential privacy becomes affordable: more data per peer (n = 10 peers, m_v = 500 each, 1,000 test instances, random tree,
64 rounds), naive Bayes and QDA, ε ∈ {1, 4, 16, ∞}, 3 repeats. Writes larger.json next to this file, one entry
per finished run (rerun to resume):

    python results/privacy/measure.py
"""

import json
import math
from pathlib import Path

from crc.experiments.cells import DirectoryCache
from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
DATASETS = ("letter", "magic", "penbased", "satimage", "twonorm", "ring")
EPSILONS = (1.0, 4.0, 16.0, None)
SETTING = {"algorithm": "paper", "nodes": 10, "local_size": 500, "test_size": 1000, "repeats": 3, "rc_iterations": 64}


def main() -> None:
    out = HERE / "larger.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    cache = DirectoryCache(HERE / ".cache")
    for model in ("nb", "qda"):
        for data in DATASETS:
            for epsilon in EPSILONS:
                key = f"{model}/{data}/{'inf' if epsilon is None else f'{epsilon:g}'}"
                if key in done:
                    continue
                config = SimulationConfig.from_settings(data=data, model=model, dp_epsilon=epsilon, **SETTING)
                result = simulate(config, network_factory(config.topology, math.inf), cache=cache)
                result.pop("repeats")
                done[key] = result
                out.write_text(json.dumps(done, indent=1))
                print(key, round(result["test_gap"], 4), flush=True)


if __name__ == "__main__":
    main()
