"""The 15 bundled data sets under the paper's algorithm, the accelerated one (exact diffusion with two local steps)
and the previous preset (momentum 0.7 with its safeguard and the aggregate classifier), 3 repeats each.

Settings: the default (random tree, n = 50, m_v = 50; run to 256 rounds with the per-round curve, so that the
gap at round 64 and the first round with gap <= 0.01 are read off one run), label drift on tree+80, message
loss p = 0.1 and 0.3, and a fresh random tree every round (64 rounds); the momentum form with a larger β on
letter and chess (momentum-sweep, 64 rounds); the accelerated algorithm from the uniform start on the sets with discrete
features under message loss (``uniform``); and the paper's and the accelerated algorithm on the synthetic sets of
``synthetic.py`` (default setting, 64 rounds; run it first). chess and splice are too small for the default test fraction:
--test-size 500.
Writes sets.json next to this file (sets-<settings>.json when only some settings are named, so that several
processes can run at once), one entry per finished run (rerun to resume; naming variants runs only those, e.g.
`accelerated` after a change of the accelerated algorithm, with its old entries deleted from sets.json):

    nice -n 10 python results/acceleration/measure.py [default] [label-tree+80] [loss0.1] [loss0.3] [tree-period1]
        [momentum-sweep] [synthetic] [paper] [accelerated] [momentum] [uniform] [uniform-averaged]
"""

import json
import math
import sys
from pathlib import Path

from crc.core.acceleration import MOMENTUM_PRESET
from crc.experiments.cells import DirectoryCache
from crc.protocol import SimulationConfig, simulate
from crc.tables.datasets import BUNDLED
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
UNIFORM = {"uniform": {"algorithm": "accelerated", "start": "uniform", "classifier": "local"},
           "uniform-averaged": {"algorithm": "accelerated", "start": "uniform"}}
"""The accelerated algorithm from the uniform start: with the local classifier (naive Bayes' default before issue 31,
with three local steps), and with today's averaged category counts."""
DISCRETE = ("chess", "marketing", "mushroom", "optdigits", "splice")
"""The sets with discrete features: the only ones where naive Bayes' categorical start differs from the uniform one."""
SWEEP = {f"momentum-beta{beta}": {"algorithm": "paper", **MOMENTUM_PRESET, "momentum": beta} for beta in (0.75, 0.8, 0.85)}
SYNTHETIC = tuple(str(HERE / "data" / f"{name}.csv.gz") for name in ("sparse-binary", "categorical", "rare-class"))
"""The data sets of ``synthetic.py`` (kinds the bundled ones do not cover), default setting, without RC to
convergence (its thousands of pooled iterations over 1,500 features cost more than the runs)."""
SETS = tuple(name for name in BUNDLED if name not in ("wdbc", "german"))
"""The 15 bundled sets with enough instances for 50 peers of 50 (wdbc has 569, german 1,000)."""
RUNS = [(setting, SETS, VARIANTS, overrides) for setting, overrides in SETTINGS.items()] + [
    ("momentum-sweep", ("letter", "chess"), SWEEP, {"curve": True}),
    ("synthetic", SYNTHETIC, {name: VARIANTS[name] for name in ("paper", "accelerated")},
     {"curve": True, "rc_converged": False, "label": "class"})] + [
    (setting, DISCRETE, UNIFORM, SETTINGS[setting]) for setting in ("loss0.1", "loss0.3")]
"""(setting, data sets, variants, overrides) of every run; a synthetic set's key names its file without suffixes."""


def main(names=()) -> None:
    only = [name for name in names if name not in VARIANTS and name not in UNIFORM]
    variants_only = [name for name in names if name in VARIANTS or name in UNIFORM]
    out = HERE / (f"sets-{'-'.join(only)}.json" if only else "sets.json")
    done = json.loads(out.read_text()) if out.exists() else {}
    known = {key: entry for path in HERE.glob("sets*.json") for key, entry in json.loads(path.read_text()).items()}
    cache = DirectoryCache(HERE / "sets" / ".cache")
    for setting, datasets, variants, overrides in RUNS:
        for data in datasets:
            for variant, preset in variants.items():
                key = f"{setting}/{Path(data).name.split('.')[0]}/{variant}"
                if key in done or (only and setting not in only) or (variants_only and variant not in variants_only):
                    continue
                extra = {"test_size": 500} if data in ("chess", "splice") else {}
                # RC to convergence is most of a run's time and the same for every variant (the same splits and seeds):
                # a variant run after the paper's takes it from the paper's entry (in any sets*.json).
                paper = known.get(f"{setting}/{data}/paper") if variant != "paper" else None
                converge = overrides.get("rc_converged", True) and paper is None
                config = SimulationConfig.from_settings(data=data, repeats=3, **extra,
                                                        **{**overrides, "rc_converged": converge}, **preset)
                results = simulate(config, network_factory(config.topology, config.period or math.inf), cache=cache)
                converged = results.get("rc_converged") if paper is None else paper["rc_converged"]
                done[key] = {"config": results["config"], "rc": results["rc"], "rc_converged": converged,
                             "crc": results["crc"], "test_gap": results["test_gap"],
                             "test_gap_converged": None if converged is None
                             else results["crc"]["test_error"] - converged["test_error"],
                             "rounds": results["rounds"],
                             "repeat_gaps": [r["test_gap"] for r in results["repeats"]],
                             "repeat_rc": [r["rc"]["test_error"] for r in results["repeats"]],
                             "repeat_curves": [[row["test_error"] for row in r["rounds"]] for r in results["repeats"]]}
                out.write_text(json.dumps(done, indent=1))
                print(key, f"{results['test_gap']:+.4f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
