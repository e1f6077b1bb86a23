"""The PLD accountant against the RDP one: the noise each needs for the same (ε, δ = 1e-5) over 64 releases, and
what that noise costs in test error (crc's test gap to RC) on magic, naive Bayes, the paper's algorithm, 3 repeats,
at two local sizes: 10 peers x 500 instances and the paper's 50 peers x 50. Writes accountant.json next to this file
(rerun to resume) and accountant.md, its table:

    python results/privacy/accountant.py
"""

import json
import math
from pathlib import Path
from unittest import mock

from crc.protocol import SimulationConfig, simulate
from crc.protocol import accountant as accountants
from crc.protocol.accountant import epsilon_spent, noise_multiplier_for
from crc.topologies import network_factory

HERE = Path(__file__).parent
DELTA, ROUNDS = 1e-5, 64
EPSILONS = (1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
SETTINGS = {"10x500": {"nodes": 10, "local_size": 500}, "50x50": {"nodes": 50, "local_size": 50}}
COMMON = {"data": "magic", "model": "nb", "algorithm": "paper", "test_size": 1000, "repeats": 3, "rc_iterations": 64,
          "rounds": ROUNDS}


def gap(setting: str, epsilon: float, accountant: str) -> float:
    config = SimulationConfig.from_settings(dp_epsilon=epsilon, **SETTINGS[setting], **COMMON)
    real_plan = accountants.plan
    with mock.patch.object(accountants, "plan", lambda *a, **k: real_plan(*a, **k, accountant=accountant)):
        result = simulate(config, network_factory(config.topology, math.inf))
    assert result["privacy"]["accountant"] == accountant
    return float(result["test_gap"])


def main() -> None:
    out = HERE / "accountant.json"
    done = json.loads(out.read_text()) if out.exists() else {}
    for epsilon in EPSILONS:
        for accountant in ("rdp", "pld"):
            done.setdefault("noise", {})[f"{accountant}/{epsilon:g}"] = noise_multiplier_for(epsilon, DELTA, ROUNDS, accountant)
        for setting in SETTINGS:
            for accountant in ("rdp", "pld"):
                key = f"{setting}/{accountant}/{epsilon:g}"
                if key not in done.setdefault("gap", {}):
                    done["gap"][key] = gap(setting, epsilon, accountant)
                    out.write_text(json.dumps(done, indent=1))
                    print(key, round(done["gap"][key], 4), flush=True)
    out.write_text(json.dumps(done, indent=1))
    lines = ["# The PLD accountant against the RDP one", "",
             "Noise multiplier z for (ε, δ = 1e-5) over 64 releases by each accountant, the exact ε of the RDP noise, "
             "and crc's test gap to RC (magic, naive Bayes, the paper's algorithm, 64 rounds, 3 repeats, 1,000 test "
             "instances) with each noise, at 10 peers x 500 instances and 50 x 50. Written by "
             "`python results/privacy/accountant.py`.", "",
             "| ε | z (RDP) | z (PLD) | noise saved | exact ε of the RDP noise | " +
             " | ".join(f"gap {s} RDP | gap {s} PLD" for s in SETTINGS) + " |",
             "|---" * (5 + 2 * len(SETTINGS)) + "|"]
    for epsilon in EPSILONS:
        rdp, pld = done["noise"][f"rdp/{epsilon:g}"], done["noise"][f"pld/{epsilon:g}"]
        gaps = " | ".join(f"{done['gap'][f'{s}/rdp/{epsilon:g}']:+.3f} | {done['gap'][f'{s}/pld/{epsilon:g}']:+.3f}"
                          for s in SETTINGS)
        lines.append(f"| {epsilon:g} | {rdp:.3f} | {pld:.3f} | {1 - pld / rdp:.1%} | "
                     f"{epsilon_spent(rdp, ROUNDS, DELTA):.3f} | {gaps} |")
    (HERE / "accountant.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

if __name__ == "__main__":
    main()
