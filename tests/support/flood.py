"""A flood of junk frames against a peer's inbox, from its own process (run as a script by ``Flood``).

``python flood.py ADDRESS SOCKETS FRAME_BYTES SECONDS``: SOCKETS PUSH connections to ADDRESS each send frames
of FRAME_BYTES random bytes, without blocking, for SECONDS seconds from the first frame the peer can take (a
connection exists: ZMQ_IMMEDIATE), at most ``START_S`` seconds after its start; prints ``ready`` once its sockets
exist, then the frames sent. So the flood overlaps the peer's rounds however slowly a loaded machine starts the
flood's Python and the peer (on 2 busy cores both took seconds, and a fixed window ended before the peer bound).
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

START_S = 60.0
"""Longest wait for the peer to accept a connection."""


class Flood:
    """The flooding process; a context manager that always reaps it."""

    def __init__(self, address: str, *, sockets: int, frame_bytes: int, seconds: float, ready_s: float = 60.0):
        """Start the flood and return once it is about to send (at most ``ready_s`` seconds)."""
        self.process = subprocess.Popen([sys.executable, str(Path(__file__)), address, str(sockets), str(frame_bytes),
                                         str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = select.select([self.process.stdout], [], [], ready_s)[0]
        line = self.process.stdout.readline() if ready else ""
        if line != "ready\n":
            self.process.kill()
            self.process.wait(timeout=10)
            raise AssertionError(f"the flood did not start within {ready_s} s: {line!r} {self.process.stderr.read()}")

    def sent(self, timeout: float) -> int:
        out, err = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, err
        return int(out)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def main(address: str, sockets: int, frame_bytes: int, seconds: float) -> int:
    import os

    import zmq

    context = zmq.Context()
    pushes = []
    for _ in range(sockets):
        push = context.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.SNDHWM, 16)
        push.setsockopt(zmq.IMMEDIATE, 1)  # queue on completed connections only
        push.connect(address)
        pushes.append(push)
    frame = os.urandom(frame_bytes)
    print("ready", flush=True)
    sent, end = 0, time.monotonic() + START_S
    while time.monotonic() < end:
        for push in pushes:
            try:
                push.send(frame, flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                continue
            if not sent:
                end = time.monotonic() + seconds
            sent += 1
    context.destroy(linger=0)
    return sent


if __name__ == "__main__":
    print(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
