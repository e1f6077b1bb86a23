"""The 15 bundled data sets under the paper's algorithm, the accelerated one (exact diffusion with two local steps)
and the previous preset (momentum 0.7 with its safeguard and the aggregate classifier), 3 repeats each.

Settings: the default (random tree, n = 50, m_v = 50; run to 256 rounds with the per-round curve, so that the
gap at round 64 and the first round with gap <= 0.01 are read off one run), label drift on tree+80, message
loss p = 0.1 and 0.3, and a fresh random tree every round (64 rounds); and the momentum form with a larger β on
letter and chess (momentum-sweep, 64 rounds). chess and splice are too small for the default test fraction:
--test-size 500.
Writes sets.json next to this file (sets-<settings>.json when only some settings are named, so that several
processes can run at once), one entry per finished run (rerun to resume):

    nice -n 10 python results/acceleration/measure.py [default] [label-tree+80] [loss0.1] [loss0.3] [tree-period1]
        [momentum-sweep]
"""

import json
import math
import sys
from pathlib import Path

from crc.core.acceleration import MOMENTUM_PRESET
from crc.tables.datasets import BUNDLED
from crc.experiments.runner import DirectoryCache
from crc.protocol import SimulationConfig, simulate
from crc.topologies import network_factory

HERE = Path(__file__).parent
VARIANTS = {"paper": {"algorithm": "paper"}, "accelerated": {"algorithm": "accelerated"},
            "momentum": {"algorithm": "paper", **MOMENTUM_PRESET}}
SETTINGS = {
    "default": {"rounds": 256, "curve": True},
    "label-tree+80": {"partition": "label", "topology": "tree+80", "curve": True},
    "loss0.1": {"loss": 0.1, "curve": True},
    "loss0.3": {"loss": 0.3, "curve": True},
    "tree-period1": {"period": 1, "curve": True},
}
SWEEP = {f"momentum-beta{beta}": {"algorithm": "paper", **MOMENTUM_PRESET, "momentum": beta} for beta in (0.75, 0.8, 0.85)}
RUNS = [(setting, BUNDLED, VARIANTS, overrides) for setting, overrides in SETTINGS.items()] + [
    ("momentum-sweep", ("letter", "chess"), SWEEP, {"curve": True})]
"""(setting, data sets, variants, overrides) of every run."""


def main(only=None) -> None:
    out = HERE / (f"sets-{'-'.join(only)}.json" if only else "sets.json")
    done = json.loads(out.read_text()) if out.exists() else {}
    cache = DirectoryCache(HERE / "sets" / ".cache")
    for setting, datasets, variants, overrides in RUNS:
        for data in datasets:
            for variant, preset in variants.items():
                key = f"{setting}/{data}/{variant}"
                if key in done or (only and setting not in only):
                    continue
                extra = {"test_size": 500} if data in ("chess", "splice") else {}
                config = SimulationConfig.from_settings(data=data, repeats=3, **extra, **overrides, **preset)
                results = simulate(config, network_factory(config.topology, config.period or math.inf), cache=cache)
                done[key] = {"config": results["config"], "rc": results["rc"], "rc_converged": results["rc_converged"],
                             "crc": results["crc"], "test_gap": results["test_gap"],
                             "test_gap_converged": results["test_gap_converged"], "rounds": results["rounds"],
                             "repeat_gaps": [r["test_gap"] for r in results["repeats"]],
                             "repeat_rc": [r["rc"]["test_error"] for r in results["repeats"]],
                             "repeat_curves": [[row["test_error"] for row in r["rounds"]] for r in results["repeats"]]}
                out.write_text(json.dumps(done, indent=1))
                print(key, f"{results['test_gap']:+.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
