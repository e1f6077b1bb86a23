"""A flood of junk frames against a peer's inbox, from its own process (run as a script by ``Flood``).

``python flood.py ADDRESS SOCKETS FRAME_BYTES SECONDS``: SOCKETS PUSH connections to ADDRESS each send frames
of FRAME_BYTES random bytes, without blocking, for SECONDS seconds; prints the frames sent.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


class Flood:
    """The flooding process; a context manager that always reaps it."""

    def __init__(self, address: str, *, sockets: int, frame_bytes: int, seconds: float):
        self.process = subprocess.Popen([sys.executable, str(Path(__file__)), address, str(sockets), str(frame_bytes),
                                         str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

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
        push.connect(address)
        pushes.append(push)
    frame = os.urandom(frame_bytes)
    sent, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for push in pushes:
            try:
                push.send(frame, flags=zmq.NOBLOCK, copy=False)
                sent += 1
            except zmq.Again:
                pass
    context.destroy(linger=0)
    return sent


if __name__ == "__main__":
    print(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
