"""results/network/chaos.md from the JSON files of results/network/chaos.py in results/network/chaos/ (run from the
checkout; each row names the command that made it):

    python results/network/chaos_table.py
"""

import json
from pathlib import Path

HERE = Path(__file__).parent
INTRO = """# Private and securely aggregating real peers under faults

Each row is one run of `results/network/chaos.py`: 4-6 `crc node` processes on 127.0.0.1, every directed edge
through a relay link of 50 ms +- 20 ms (`crc/bench/relay.py`), twonorm, naive Bayes, the paper's algorithm with the
aggregate classifier, 100 instances a peer, timeout T = 1 s, first round F = 5 s, K = 3 (`--down-after`). Privacy:
`sa` `--secure-aggregation`; `distributed` with `--dp-epsilon E --dp-noise distributed`; `local` `--dp-epsilon E`
(local noise; `local64`: E = 64, else 16, as each command says). The scenarios are those of
`results/network/chaos.py`; `-ring`: 4 peers on a ring; `-before`: the same command run with main's `nodes/peer.py`
(a0eaf41), before a peer wrote its checkpoint of round 0 before its first send; `-silent`: the same command run with
`nodes/` of bf104f7, before a member that refuses an unmasking request or confirmation answered with a decline (it
sent nothing, and the recipient waited its timeout); `-noresend`: the same command run with `nodes/` of 7c902b0,
before a peer resumed from its checkpoint told its neighbours its round and they sent it again what they had sent
its killed process (its first round waited for frames that died with it); `-T5`: T = 5 s (`--timeout 5`); `-d1`:
distributed noise
with `--dp-dropouts 1` (a sum may go without one member). One run each: under local noise at
E = 16 the run without a fault alone ends anywhere from 0.08 to 0.36 test error (and near chance at 160 rounds, whose
plan puts more noise on each release), so the gaps of single private runs say little; the counts and times do. The
victim is the peer with the most neighbours (peer 0 on these graphs). Columns: wall
time from the common start to the last exit (start-up included: forking and planning 6 private peers on 2 shared
cores takes seconds); peers finished (exit 0 with a model); the mean test error of the finished peers and its gap to
the central RC; the longest round of a live peer and its rounds over 2 T; the rounds whose neighbourhood sum could
not be unmasked and the unmasking requests refused (all peers); the rounds the victim skipped; the victim's rounds
whose checkpoint was seen with two different statistics (a round computed and sent twice) out of the rounds seen;
after the start-up kill, whether the victim resumed at round 0 and kept its noise key (private peers); warning
lines and resident memory (KiB) of the live peers from a quarter into the run after the fault to its end (largest
growth). Made by `python results/network/chaos_table.py` from the JSON in `results/network/chaos/`.
"""
COLUMNS = ("run", "wall s", "finished", "test error", "gap", "live round max ms", "rounds > 2T", "unmask fallbacks",
           "refused", "victim skipped", "released twice / seen", "resumed at 0 / key kept", "warnings +", "RSS KiB +")


def row(name: str, run: dict) -> str:
    """One table row of a run's figures."""
    peers = run["per_peer"]
    live = [p for i, p in peers.items() if int(i) != run["victim"] and "round_ms_max" in p]
    growth = run.get("growth") or {}
    warnings = max((b - a for a, b in growth.get("warning_lines", {}).values()), default=0)
    memory = max((b - a for a, b in growth.get("rss_kib", {}).values() if a is not None and b is not None), default=0)
    cells = [f"`{name}`", f"{run['wall_s']:.1f}", f"{run['finished']}/{run['nodes']}", f"{run['test_error']:.4f}",
             f"{run['test_gap']:+.4f}", f"{max(p['round_ms_max'] for p in live):.0f}",
             str(sum(p["rounds_over_2T"] for p in live)),
             str(sum(p.get("unmask_fallbacks") or 0 for p in peers.values() if "rounds_done" in p)),
             str(sum(p.get("reveals_refused") or 0 for p in peers.values() if "rounds_done" in p)),
             str(peers[str(run["victim"])].get("rounds_skipped", "-")),
             f"{run['released_twice']} / {run['victim_rounds_seen']}", restarted(run), str(warnings), str(memory)]
    return "| " + " | ".join(cells) + " |"


def restarted(run: dict) -> str:
    """Of the start-up kill: whether the victim resumed at round 0, and kept its noise key (- without one)."""
    if run["scenario"] != "startup":
        return "-"
    kept = run["noise_key_kept"]
    return f"{'yes' if run['resumed_at_round_0'] else 'no'} / {'-' if kept is None else 'yes' if kept else 'no'}"


def command(run: dict, name: str) -> str:
    """The command line that made a run (its workdir aside)."""
    extra = "" if run["epsilon"] is None else f" --epsilon {run['epsilon']:g}"
    extra += "" if run["partition_s"] is None else f" --partition-s {run['partition_s']:g}"
    extra += "" if run["timeout_s"] == 1.0 else f" --timeout {run['timeout_s']:g}"
    extra += f" --dp-dropouts {run['dp_dropouts']}" if run.get("dp_dropouts") else ""
    return (f"python results/network/chaos.py --privacy {run['privacy']} --scenario {run['scenario']} --topology "
            f"{run['topology']} --nodes {run['nodes']} --rounds {run['rounds']} --local-size {run['local_size']}{extra} "
            f"--workdir DIR --out results/network/chaos/{name}.json")


def render(directory: Path) -> str:
    """chaos.md of the runs' JSON files in ``directory``: the table, then each run's command."""
    runs = {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}
    lines = [INTRO, "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [row(name, run) for name, run in runs.items()]
    lines += ["", "Commands:", ""] + [f"- `{name}`: `{command(run, name)}`" for name, run in runs.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    (HERE / "chaos.md").write_text(render(HERE / "chaos"))


if __name__ == "__main__":
    main()
