"""Flood measurement: a 3-peer chain (penbased), the middle peer flooded for 5 s; its RSS, fds, round times, result,
and SIGTERM latency during the flood.

    python results/robustness/flood.py clean|f20|f20term|f1000|f1000term [FRAME_BYTES] [--insecure]

Peers are keyed (CURVE) unless --insecure is given: then the flood reaches the decoder.

FRAME_BYTES defaults to the largest valid frame (larger ones are dropped by ZeroMQ with their connection)."""
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from crc.core.model_file import load_model
from crc.core.models import make_model
from crc.core.schema import Schema
from crc.nodes.wire import ENVELOPE_BYTES
from support.flood import Flood
from support.network import Network, scenario

INSECURE = "--insecure" in sys.argv
ARGS = [arg for arg in sys.argv[1:] if arg != "--insecure"]


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
def fds(pid):
    import os
    return len(os.listdir(f"/proc/{pid}/fd"))

def run(tag, sockets, seconds, rounds, term):
    d = Path(tempfile.mkdtemp(prefix=f"crc-flood-{tag}-"))
    config, graph, expected = scenario(d, nodes=3, rounds=rounds, data="penbased", local_size=50)
    victim = max(graph, key=graph.degree)
    size = make_model(config.model, Schema.load(d / "schema.json")).size
    frame = int(ARGS[1]) if len(ARGS) > 1 else 8 * size + ENVELOPE_BYTES
    out = {"tag": tag, "sockets": sockets, "seconds": seconds, "frame_bytes": frame}
    with Network(d, graph, config, timeout=10.0, plaintext=INSECURE) as net:
        net.start_all()
        net.wait_for_round(victim, 2)
        pid = net.processes[victim].pid
        base = peak = rss_mb(pid)
        maxfd = fds(pid)
        flood = Flood(net.addresses[victim], sockets=sockets, frame_bytes=frame, seconds=seconds) if sockets else None
        start, term_latency = time.monotonic(), None
        while net.processes[victim].poll() is None and time.monotonic() - start < seconds + 120:
            peak = max(peak, rss_mb(pid) or 0)
            maxfd = max(maxfd, fds(pid))
            if term and time.monotonic() - start > seconds / 2 and term_latency is None:
                t0 = time.monotonic()
                net.signal(victim, signal.SIGTERM)
                net.wait([victim], limit=10)
                term_latency = time.monotonic() - t0
                break
            time.sleep(0.05)
        if flood:
            out["flood_frames_sent"] = flood.sent(timeout=seconds + 30)
        out.update(rss_before_mb=round(base, 1), rss_peak_mb=round(peak, 1), growth_mb=round(peak - base, 1), max_fds=maxfd)
        if term:
            out["sigterm_s"] = round(term_latency, 3)
        else:
            codes = net.wait(limit=120)
            out["exit_codes"] = codes
            m = load_model(net.model_path(victim)).metrics
            ms = np.array(m["round_ms"][1:])
            out.update(round_ms_p50=round(float(np.median(ms)), 1), round_ms_max=round(float(ms.max()), 1),
                       rejected={k: v for k, v in m["rejected"].items() if v},
                       max_diff_vs_simulator=float(np.max(np.abs(net.stats() - expected) / np.abs(expected).max())))
    print(json.dumps(out), flush=True)

MODES = {"clean": ("clean", 0, 5, 1500, False), "f20": ("f20", 20, 5.0, 1500, False),
         "f20term": ("f20term", 20, 5.0, 100000, True), "f1000": ("f1000", 1000, 5.0, 1500, False),
         "f1000term": ("f1000term", 1000, 5.0, 100000, True)}
if ARGS[0] in MODES:
    run(*MODES[ARGS[0]])
