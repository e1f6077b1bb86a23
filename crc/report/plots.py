"""PNG figures from results (needs the optional ``plot`` extra: matplotlib).

A *curve* here is a dict ``{"name", "rounds": [{"round", "test_error", "test_std"}],
"rc_test_error", "ml_test_error"}``: CRC's per-round test error (mean and
standard deviation across nodes) with the centralized RC and ML levels.
"""

from __future__ import annotations

import math

from crc.core.errors import CRCError
from crc.report.format import CONVERGED, NEAR


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise CRCError("plots need matplotlib: pip install 'crc-p2p[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def convergence_figure(curves: list[dict], path, *, title: str = "CRC test error by round") -> None:
    """One panel per curve: CRC mean +- std across nodes, with RC and ML as horizontal lines."""
    if not curves:
        raise CRCError("no per-round errors to plot (run with --curve)")
    plt = _pyplot()
    columns = min(len(curves), 4)
    rows = math.ceil(len(curves) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 2.8 * rows), squeeze=False)
    for ax, curve in zip(axes.flat, curves):
        rounds = [row["round"] for row in curve["rounds"]]
        mean = [row["test_error"] for row in curve["rounds"]]
        std = [row["test_std"] for row in curve["rounds"]]
        ax.plot(rounds, mean, color="C0", label="CRC (mean over nodes)")
        ax.fill_between(rounds, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                        color="C0", alpha=0.25, linewidth=0, label="CRC ± std")
        ax.axhline(curve["rc_test_error"], color="C3", linestyle="--", label="RC (pooled)")
        ax.axhline(curve["ml_test_error"], color="C2", linestyle=":", label="ML (pooled)")
        ax.set_title(curve["name"], fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("test error")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(curves):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout(rect=(0, 0.06, 1, 0.96))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def gap_density_figure(series: dict[str, list[tuple[float, float]]], path, *, title: str) -> None:
    """Test gap against graph density (edges / possible edges), one line per data set."""
    if not series:
        raise CRCError("no cells with a graph density to plot")
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(6.4, 4.2))
    for index, (name, points) in enumerate(series.items()):
        points = sorted(points)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=f"C{index % 10}", label=name)
    ax.axhline(CONVERGED, color="black", linewidth=0.8, linestyle="--")
    ax.axhline(NEAR, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("graph density (edges / possible edges, log scale)")
    ax.set_ylabel("test gap CRC - RC")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
