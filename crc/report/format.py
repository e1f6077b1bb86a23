"""How reports write figures: decimals, the paper's gap thresholds and highlighting, Markdown rows and headings.

Gaps are highlighted as in the paper: **bold** below ``CONVERGED``, *italic*
below ``NEAR``, both on the unrounded gap.
"""

from __future__ import annotations

CONVERGED = 0.01
"""The paper's threshold: CRC has converged to RC when the gap (an error rate difference) is below 0.01."""
NEAR = 0.05
"""A gap below 0.05 is close to converged (italic)."""
HIGHLIGHTING = f"**bold**: gap < {CONVERGED}; *italic*: gap < {NEAR}"
LEGEND = f"{HIGHLIGHTING}; n/a: cell not run (reason below)."


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
    """A mean log-likelihood: 2 decimals, or scientific notation from 10^4 on; '–' for None."""
    if value is None:
        return "–"
    return f"{value:.2f}" if abs(value) < 1e4 else f"{value:.2e}"


def markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def heading(table: dict) -> list[str]:
    """A table's title, its settings and compute time (once a cell has finished), and its note, as Markdown lines."""
    lines = [f"# {table['table']}: {table['title']}", ""]
    settings = table.get("settings") or {}
    if settings:
        lines += [f"Model {settings['model']}, {settings['repeats']} repeat(s) (seed {settings['seed']}), "
                  f"{settings['test_instances']} test instances per repeat; compute time {table['seconds']:.0f} s.", ""]
    if table.get("note"):
        lines += [table["note"], ""]
    return lines
