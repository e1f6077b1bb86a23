"""A guard for tests of inputs that could block a reader forever (a FIFO): the test fails instead of hanging."""

from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def fails_if_blocked(seconds: int = 5):
    """Raise TimeoutError in the block if it is still running after ``seconds`` (SIGALRM: main thread, POSIX)."""
    def blocked(signum, frame):
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
