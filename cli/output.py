"""What the commands say besides their results: verbosity (``crc -v`` / ``crc -q``), warnings, progress, JSON output.

Everything here goes to standard error except ``emit_json``. The group's
``-v``/``-q`` set a verbosity (0 by default, +1 per ``-v``, -1 per ``-q``)
that decides the level of the ``crc`` loggers and of a peer's log, and whether
progress, notes and warnings are shown (``-q`` hides them; errors always show).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time

import click

VERBOSITY_KEY = "crc.verbosity"
TINY_TEST_SET = 30
"""Below this many test instances a run's test error is too coarse to mean much: the commands warn."""
PROGRESS_EVERY_FRACTION = 0.1
PROGRESS_EVERY_S = 5.0
PROGRESS_MIN_GAP_S = 1.0
"""Without a terminal, a progress line every 10 % of the work (but at most one a second) or every 5 s, and a last
one at the end if any was printed: a run of a second or less prints none."""
DETAIL_EVERY_S = 0.1
"""Shortest interval between two rewrites of a terminal's line by ``Progress.detail``."""


def verbosity() -> int:
    """The verbosity set on ``crc`` (0 outside a command, as in tests that call a command directly)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(VERBOSITY_KEY, 0) if ctx is not None else 0


def log_level(default: str = "info") -> str:
    """A logging level name: ``default`` moved by the verbosity (``-v`` one step more verbose, ``-q`` one less)."""
    names = ["debug", "info", "warning", "error"]
    index = names.index(default) - verbosity()
    return names[min(max(index, 0), len(names) - 1)]


def configure_logging(level: int) -> None:
    """Send the ``crc`` loggers (but the peers', which ``crc node`` configures itself) to standard error."""
    logger = logging.getLogger("crc")
    handler = _ClickHandler()
    handler.addFilter(_OncePerCommand("crc.data"))
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


class _OncePerCommand(logging.Filter):
    """Lets a record of the logger ``name`` through once per message: a command may read its table twice (to fit the
    local size, then to run), and each read warns about the same columns."""

    def __init__(self, name: str):
        super().__init__()
        self.logger, self.seen = name, set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != self.logger:
            return True
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


class _ClickHandler(logging.Handler):
    """Writes records through click, so that whatever standard error is at the time (a test runner's) gets them."""

    def emit(self, record: logging.LogRecord) -> None:
        prefix = "" if record.levelno < logging.WARNING else f"{record.levelname.capitalize()}: "
        click.echo(prefix + record.getMessage(), err=True)


def warn(message: str) -> None:
    """One line on standard error, unless ``-q``."""
    if verbosity() >= 0:
        click.echo(f"Warning: {message}", err=True)


def note(message: str) -> None:
    """One informational line on standard error (file written, timings), unless ``-q``."""
    if verbosity() >= 0:
        click.echo(message, err=True)


def tiny_test_set_warning(instances: int, *, short: bool = False) -> str | None:
    """The warning for a test set of ``instances`` instances, or None if it is large enough; ``short``: the training
    set left no more for it (a larger --test-size would not help)."""
    if instances >= TINY_TEST_SET:
        return None
    resolution = f"errors move in steps of 1/{instances} = {1 / instances:.3g}" if instances else "no test error at all"
    remedy = ("fewer training instances (--nodes, --local-size, --train-size) leave more for it" if short else
              "use --test-size 0.25 (a fraction) or a count of a few hundred")
    return f"the test set has only {instances} instance{'s' if instances != 1 else ''} (< {TINY_TEST_SET}): {resolution}; {remedy}"


def emit_json(obj, *, out: str | None, to_stdout: bool) -> None:
    """Print ``obj`` as JSON on standard output if ``to_stdout``; write it to the file ``out`` if given."""
    text = json.dumps(obj, indent=2)
    if out:
        from crc.core.files import atomic_write_text

        atomic_write_text(out, text + "\n")
        note(f"wrote {out}")
    if to_stdout:
        click.echo(text)


class Progress:
    """Progress of ``total`` units of work on standard error.

    On a terminal: one line rewritten in place (bar, count, elapsed, ETA). Otherwise:
    one line every 10 % or every 5 s. ``phase(text)`` announces work that is not
    counted in units (set-up); its time is left out of the rate, and the ETA adds
    the mean phase time for each of the ``phases`` not yet begun.
    """

    def __init__(self, total: int, label: str, unit: str, *, phases: int = 0, enabled: bool | None = None,
                 terminal: bool | None = None, clock=time.monotonic):
        self.total, self.label, self.unit, self.phases = max(int(total), 1), label, unit, phases
        self.enabled = verbosity() >= 0 if enabled is None else enabled
        self.terminal = _stderr_is_terminal() if terminal is None else terminal
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.work_s = 0.0  # time spent between two counted updates (no phase in between)
        self.work_units = 0
        self.phase_s: list[float] = []
        self._phase_started: float | None = None
        self._phase_text = ""
        self._last = self.started
        self._printed_at = self.started
        self._printed_fraction = 0.0
        self._printed_line = False  # without a terminal: whether a line was printed (then the last one is 100 %)
        self._width = 0

    def phase(self, text: str) -> None:
        now = self.clock()
        self._end_phase(now)
        self._phase_started, self._phase_text = now, text
        if self.enabled and self.terminal:
            self._rewrite(f"{self.label}: {text}")
        elif self.enabled and now - self.started >= PROGRESS_EVERY_S:
            self._printed_at, self._printed_line = now, True
            click.echo(f"{self.label}: {text}", err=True)

    def detail(self, text: str) -> None:
        """How far the current phase has got (``text``): on a terminal at most every DETAIL_EVERY_S, else a line
        at most every PROGRESS_EVERY_S."""
        now = self.clock()
        if not self.enabled or now - self._printed_at < (DETAIL_EVERY_S if self.terminal else PROGRESS_EVERY_S):
            return
        self._printed_at = now
        line = f"{self.label}: {self._phase_text}: {text}" if self._phase_text else f"{self.label}: {text}"
        if self.terminal:
            self._rewrite(line)
        else:
            self._printed_line = True
            click.echo(line, err=True)

    def _end_phase(self, now: float) -> None:
        if self._phase_started is not None:
            self.phase_s.append(now - self._phase_started)
            self._phase_started = None

    def update(self, done: int) -> None:
        """``done`` units finished so far (absolute)."""
        now = self.clock()
        done = min(max(int(done), self.done), self.total)
        if self._phase_started is not None:
            self._end_phase(now)
        elif done > self.done:
            self.work_s += now - self._last
            self.work_units += done - self.done
        self._last, self.done = now, done
        if not self.enabled:
            return
        if self.terminal:
            self._rewrite(self._bar_text(now))
        elif self._printed_fraction < 1:  # once 100 % is printed, later updates (a caller polling) add nothing
            fraction, since = self.done / self.total, now - self._printed_at
            step = fraction - self._printed_fraction >= PROGRESS_EVERY_FRACTION and since >= PROGRESS_MIN_GAP_S
            last = self.done == self.total and self._printed_line  # a log that said 0 % ends at 100 %
            if step or since >= PROGRESS_EVERY_S or last:
                self._printed_fraction, self._printed_at, self._printed_line = fraction, now, True
                click.echo(self._line_text(now), err=True)

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left, from the rate of the counted work and the mean phase time; None before any rate is known."""
        if self.work_units == 0 or self.work_s <= 0:
            return None
        left = (self.total - self.done) * self.work_s / self.work_units
        begun = len(self.phase_s) + (self._phase_started is not None)
        if self.phase_s and self.phases > begun:
            left += (self.phases - begun) * sum(self.phase_s) / len(self.phase_s)
        return left

    def _counts(self, now: float) -> str:
        eta = self.eta(now) if self.done < self.total else None
        eta_text = "" if eta is None else f", about {_seconds(eta)} left"
        set_up = sum(self.phase_s) + (0.0 if self._phase_started is None else now - self._phase_started)
        set_up_text = f", {_seconds(set_up)} of it set-up" if set_up > 0 else ""  # else a long set-up makes the ETA look wrong
        return f"{self.done}/{self.total} {self.unit}, {_seconds(now - self.started)} elapsed{set_up_text}{eta_text}"

    def _bar_text(self, now: float) -> str:
        width = 24
        filled = int(width * self.done / self.total)
        return f"{self.label} [{'#' * filled}{'-' * (width - filled)}] {100 * self.done / self.total:3.0f}%  {self._counts(now)}"

    def _line_text(self, now: float) -> str:
        return f"{self.label}: {100 * self.done / self.total:.0f}% ({self._counts(now)})"

    def _rewrite(self, text: str) -> None:
        padding = max(self._width - len(text), 0)
        click.echo("\r" + text + " " * padding, err=True, nl=False)
        self._width = len(text)

    def close(self) -> None:
        """End the progress display (a terminal's line is cleared)."""
        if self.enabled and self.terminal and self._width:
            click.echo("\r" + " " * self._width + "\r", err=True, nl=False)
            self._width = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return "?"
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s" if value < 120 else f"{value / 60:.0f} min"


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
