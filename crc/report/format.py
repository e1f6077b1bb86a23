"""How reports write figures: decimals, the paper's gap thresholds and highlighting, Markdown rows and headings.

Gaps are highlighted as in the paper: **bold** below ``CONVERGED``, *italic*
below ``NEAR``, both on the unrounded gap.
"""

from __future__ import annotations

from crc.core.models.options import model_named

CONVERGED = 0.01
"""The paper's threshold: CRC has converged to RC when the gap (an error rate difference) is below 0.01."""
NEAR = 0.05
"""A gap below 0.05 is close to converged (italic)."""
HIGHLIGHTING = f"**bold**: gap < {CONVERGED}; *italic*: gap < {NEAR}"
DEGENERATE_LOGLIK = -1000.0
"""A mean test log-likelihood per instance below this is marked: on standardized features a sound model scores
tens of nats per instance at worst, so a figure this low means some class-conditional variance sits at its floor."""
DEGENERATE_MARK = "†"
DEGENERATE_NOTE = (f"{DEGENERATE_MARK} log-likelihood below {DEGENERATE_LOGLIK:g} per instance: some class-conditional "
                   "variance sits at its floor of 1e-9 (a feature constant, or nearly, within a class of the training "
                   "data; for QDA a direction of a covariance), so a test value off that constant gets a huge negative "
                   "log-density. Errors are unaffected; the results JSON keeps the figure as computed.")
DEGENERATE_NOISE_NOTE = ("Under --dp-epsilon the usual cause is the noise: a noisy second moment below the squared noisy "
                         "mean gives a variance below the floor, which is raised to it.")
"""Added to ``DEGENERATE_NOTE`` for a private run, whose ML and RC (learnt without noise) are sound where CRC's is not."""
CSV_DIGITS = 6
"""Significant digits of the figures in CSV output: errors are measured on at most tens of thousands of instances."""
LEGEND = f"{HIGHLIGHTING}; n/a: cell not run (reason below)."


def model_of(config: dict) -> str:
    """The model of a results JSON's ``config`` as it is named (``crc.core.models.options.model_named``)."""
    return model_named(config["model"], config.get("structure"))


def number(value, digits: int = 2) -> str:
    """A figure with ``digits`` decimals, never '-0.00'; '–' for None."""
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def gap(value) -> str:
    """A gap (3 decimals, so that the highlighting can be read off the figure) with the paper's highlighting."""
    text = number(value, 3)
    if value is None:
        return text
    if value < CONVERGED:
        return f"**{text}**"
    return f"*{text}*" if value < NEAR else text


def loglik(value) -> str:
    """A mean log-likelihood: 2 decimals, or scientific notation from 10^4 on; '–' for None; marked with
    ``DEGENERATE_MARK`` below ``DEGENERATE_LOGLIK`` (see ``DEGENERATE_NOTE``)."""
    if value is None:
        return "–"
    text = f"{value:.2f}" if abs(value) < 1e4 else f"{value:.2e}"
    return text + DEGENERATE_MARK if degenerate_loglik(value) else text


def degenerate_loglik(value) -> bool:
    """Whether a mean test log-likelihood is below ``DEGENERATE_LOGLIK`` (a variance at its floor)."""
    return value is not None and value < DEGENERATE_LOGLIK


def csv_number(value) -> str:
    """A figure for CSV: integers as they are, other numbers to ``CSV_DIGITS`` significant digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{float(value):.{CSV_DIGITS}g}"


def markdown_row(cells: list[str]) -> str:
    """A Markdown table row; a cell's bars are escaped and its line breaks become spaces (names come from files)."""
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\r", " ").replace("\n", " ") for cell in cells) + " |"


def heading(table: dict) -> list[str]:
    """A table's title, its settings and compute time (once a cell has finished), and its note, as Markdown lines."""
    lines = [f"# {table['table']}: {table['title']}", ""]
    settings = table.get("settings") or {}
    if settings:
        test = settings["test_instances"]
        test = f"{test:g} test instances" if test >= 1 else f"{test:.0%} of each data set as test instances"
        lines += [f"Model {settings['model']}, {settings['repeats']} repeat(s) (seed {settings['seed']}), "
                  f"{test} per repeat; compute time {table['seconds']:.0f} s.", ""]
    if table.get("note"):
        lines += [table["note"], ""]
    return lines
