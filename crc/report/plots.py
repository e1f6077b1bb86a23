"""Figures from results (needs the optional ``plot`` extra: matplotlib), each written as a PNG and a vector PDF.

Every figure is sized for a paper: ``FULL_WIDTH`` (a two-column paper's text
width) or ``COLUMN_WIDTH`` inches wide, fonts of 7-9 pt, PNG at ``DPI``; a
figure function takes the PNG's path, writes the PDF beside it and returns
both paths.

A *curve* is a dict ``{"name", "rounds": [{"round", "test_error", "test_std"}],
"rc_test_error", "ml_test_error"}`` and optionally ``"series"``: CRC's
per-round test error (mean and standard deviation across nodes) with the
centralized RC and ML levels. Curves with the same name share a panel, one
line per series (table XI's iter = 1, 2, 3 of one data set).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from crc.core.errors import CRCError
from crc.report.format import CONVERGED, NEAR

DPI = 200
FULL_WIDTH = 7.0
COLUMN_WIDTH = 3.5
"""Inches: a two-column paper's text width and column width."""
STYLE = {"font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
         "legend.fontsize": 7, "figure.titlesize": 9, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
         "lines.linewidth": 1.2, "lines.markersize": 4, "pdf.fonttype": 42}
RC_STYLE = {"color": "black", "linestyle": "--", "linewidth": 0.9}
ML_STYLE = {"color": "0.45", "linestyle": ":", "linewidth": 1.1}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def require_matplotlib() -> None:
    """Raise CRCError, saying how to install it, if matplotlib cannot be imported."""
    if importlib.util.find_spec("matplotlib") is None:
        raise CRCError("plots need matplotlib: pip install 'crc-p2p[plot]' (or '.[plot]' from a clone)")


def _pyplot():
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, figure, path) -> list[Path]:
    """Write ``figure`` as ``path`` (PNG, ``DPI``) and as a PDF beside it; returns both paths."""
    png = Path(path).with_suffix(".png")
    pdf = png.with_suffix(".pdf")
    for target in (png, pdf):
        figure.savefig(target, dpi=DPI, bbox_inches="tight", pad_inches=0.03,
                       metadata={"Creator": "crc report"} if target is png else {"Creator": "crc report", "CreationDate": None})
    plt.close(figure)
    return [png, pdf]


def _grid(count: int, columns: int) -> tuple[int, int]:
    columns = min(count, columns)
    return math.ceil(count / columns), columns


def _reference_lines(ax, *, label: bool = True) -> None:
    """The paper's thresholds as horizontal lines, labelled at their right end."""
    for level, style, text in ((CONVERGED, "--", f"{CONVERGED:g}: converged"), (NEAR, ":", f"{NEAR:g}: near")):
        ax.axhline(level, color="0.3", linewidth=0.8, linestyle=style, zorder=1)
        if label:
            ax.annotate(text, xy=(1, level), xycoords=("axes fraction", "data"), xytext=(3, 0), textcoords="offset points",
                        va="center", ha="left", fontsize=6.5, color="0.25", annotation_clip=False)
    ax.axhline(0, color="0.6", linewidth=0.6, zorder=1)


def convergence_figure(curves: list[dict], path, *, title: str = "CRC test error by round") -> list[Path]:
    """One panel per name: CRC's mean test error across nodes by round (one line per series, a band of ± one std),
    with the pooled RC and ML levels."""
    if not curves:
        raise CRCError("no per-round errors to plot (run with --curve)")
    plt = _pyplot()
    panels: dict[str, list[dict]] = {}
    for curve in curves:
        panels.setdefault(curve["name"], []).append(curve)
    series = list(dict.fromkeys(curve.get("series") for curve in curves))
    colours = {name: f"C{index % 10}" for index, name in enumerate(series)}
    with plt.rc_context(STYLE):
        if len(panels) == 1:
            figure, axes = plt.subplots(1, 1, figsize=(COLUMN_WIDTH, 2.5), squeeze=False)
        else:
            rows, columns = _grid(len(panels), 4)
            figure, axes = plt.subplots(rows, columns, figsize=(FULL_WIDTH, 1.75 * rows + 0.4), squeeze=False)
        for ax, (name, members) in zip(axes.flat, panels.items()):
            for curve in members:
                rounds = [row["round"] for row in curve["rounds"]]
                mean = [row["test_error"] for row in curve["rounds"]]
                std = [row["test_std"] for row in curve["rounds"]]
                colour = colours[curve.get("series")]
                label = f"CRC {curve['series']}" if curve.get("series") else "CRC (mean over peers)"
                ax.plot(rounds, mean, color=colour, label=label, zorder=3)
                ax.fill_between(rounds, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                                color=colour, alpha=0.18 if len(members) > 1 else 0.25, linewidth=0,
                                label="± 1 std over peers", zorder=2)
            for level in sorted({c["rc_test_error"] for c in members}):
                ax.axhline(level, label="RC (pooled data)", zorder=1, **RC_STYLE)
            for level in sorted({c["ml_test_error"] for c in members}):
                ax.axhline(level, label="ML (pooled data)", zorder=1, **ML_STYLE)
            ax.set_title(f"{title}: {name}" if len(panels) == 1 else name)
            ax.margins(x=0.01)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        for ax in axes[-1]:
            ax.set_xlabel("round")
        for ax in axes[:, 0]:
            ax.set_ylabel("test error")
        if len(panels) > 1 and axes.shape[0] > 1:  # an x label on the last panel of a column whose bottom panel is empty
            for ax in list(axes.flat)[len(panels) - axes.shape[1]:len(panels)]:
                ax.set_xlabel("round")
        handles = _legend_handles(axes)
        if len(panels) == 1:
            figure.legend(*handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
        else:
            figure.legend(*handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(handles[0]), 6), frameon=False)
        if len(panels) > 1:
            figure.suptitle(title)
        figure.tight_layout()
        return _save(plt, figure, path)


def _legend_handles(axes) -> tuple[list, list]:
    """One handle per distinct label over all panels; a band's label once."""
    handles, labels = [], []
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def gap_figure(series: dict[str, list[tuple[float, float]]], path, *, title: str, xlabel: str, ylabel: str = "test gap CRC − RC",
               xscale: str = "linear", ticks: list[tuple[float, str]] | None = None,
               extras: dict[str, dict[str, tuple[float, float]]] | None = None) -> list[Path]:
    """A gap against a quantity, one line per data set, the 0.01 and 0.05 thresholds labelled, the legend outside.

    ``ticks`` are (x, label) pairs for the x axis; ``extras`` are points drawn as separate markers, not on the
    lines: ``{marker label: {data set: (x, y)}}`` (table IV's chain, which has the tree's density).
    """
    if not series:
        raise CRCError("nothing to plot: no finished cells")
    plt = _pyplot()
    extras = extras or {}
    with plt.rc_context(STYLE):
        figure, ax = plt.subplots(figsize=(FULL_WIDTH * 0.9, 3.0))
        _reference_lines(ax)
        for index, (name, points) in enumerate(series.items()):
            points = sorted(points)
            colour = f"C{index % 10}"
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=MARKERS[index // 10 % len(MARKERS)],
                    color=colour, label=name, zorder=3)
            for position, points_by_set in enumerate(extras.values()):
                if name in points_by_set:
                    x, y = points_by_set[name]
                    ax.plot([x], [y], linestyle="none", marker=MARKERS[(position + 1) % len(MARKERS)], markersize=6,
                            markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.2, zorder=4)
        ax.set_xscale(xscale)
        if ticks:
            ax.set_xticks([x for x, _ in ticks])
            ax.set_xticklabels([label for _, label in ticks])
            ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        handles, labels = ax.get_legend_handles_labels()
        for position, marker_label in enumerate(extras):
            handles.append(ax.plot([], [], linestyle="none", marker=MARKERS[(position + 1) % len(MARKERS)], markersize=6,
                                   markerfacecolor="white", markeredgecolor="black")[0])
            labels.append(marker_label)
        figure.tight_layout()
        figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(series), 5),
                      frameon=False, columnspacing=1.2, handlelength=1.8)
        return _save(plt, figure, path)


MODEL_METHODS = (("ml", "ML", {"marker": "x", "color": "0.45", "markersize": 4.5}),
                 ("rc", "RC", {"marker": "o", "color": "black", "markersize": 3.5}),
                 ("crc", "CRC (mean over peers)", {"marker": "s", "color": "C0", "markersize": 4}))
"""The methods of ``methods_figure``'s default: (key, legend label, matplotlib style)."""


def methods_figure(panels: dict[str, list[tuple[str, dict[str, float]]]], path, *, title: str,
                   methods=MODEL_METHODS, ylabel: str = "test error") -> list[Path]:
    """Per data set: each model's figure under every method of ``methods`` (a line from RC to CRC: the gap).

    ``panels`` is ``{data set: [(model label, {method key: figure})]}``; ``methods`` are (key, label, style).
    """
    if not panels:
        raise CRCError("nothing to plot: no finished cells")
    plt = _pyplot()
    with plt.rc_context(STYLE):
        rows, columns = _grid(len(panels), 5)
        figure, axes = plt.subplots(rows, columns, figsize=(FULL_WIDTH, 1.9 * rows + 0.5), squeeze=False)
        for ax, (name, models) in zip(axes.flat, panels.items()):
            xs = range(len(models))
            for x, (_, figures) in zip(xs, models):
                if "rc" in figures and "crc" in figures:
                    ax.plot([x, x], [figures["rc"], figures["crc"]], color="C0", linewidth=1.0, zorder=2)
            for key, label, style in methods:
                points = [(x, figures[key]) for x, (_, figures) in zip(xs, models) if key in figures]
                ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none", label=label, zorder=3, **style)
            ax.set_xticks(list(xs))
            ax.set_xticklabels([label for label, _ in models], rotation=90)
            ax.set_xlim(-0.6, len(models) - 0.4)
            ax.set_title(name)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        figure.legend(*_legend_handles(axes), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(methods),
                      frameon=False)
        figure.suptitle(title)
        figure.tight_layout()
        return _save(plt, figure, path)


def peer_rounds_figure(peers: list[dict], path, *, title: str) -> list[Path]:
    """Real peers by round: each peer's local soft 0-1 loss, and the round's wall time (median and maximum over peers).

    ``peers`` is ``[{"node", "soft_loss": [per round], "round_ms": [per round]}]``.
    """
    peers = [peer for peer in peers if peer.get("soft_loss")]
    if not peers:
        raise CRCError("nothing to plot: no peer finished a round")
    plt = _pyplot()
    with plt.rc_context(STYLE):
        figure, (loss_ax, time_ax) = plt.subplots(1, 2, figsize=(FULL_WIDTH, 2.6))
        for peer in peers:
            rounds = range(1, len(peer["soft_loss"]) + 1)
            loss_ax.plot(rounds, peer["soft_loss"], color="C0", alpha=0.35, linewidth=0.7)
        longest = max(len(peer["soft_loss"]) for peer in peers)
        mean = [_mean([peer["soft_loss"][t] for peer in peers if t < len(peer["soft_loss"])]) for t in range(longest)]
        loss_ax.plot(range(1, longest + 1), mean, color="black", label="mean over peers")
        loss_ax.plot([], [], color="C0", alpha=0.5, linewidth=0.7, label="one peer")
        loss_ax.set_xlabel("round")
        loss_ax.set_ylabel("local soft 0-1 loss")
        loss_ax.set_title("each peer's loss on its own data")
        loss_ax.legend(frameon=False)
        times = [[peer["round_ms"][t] for peer in peers if t < len(peer.get("round_ms", []))] for t in range(longest)]
        rounds = [t + 1 for t, values in enumerate(times) if values]
        time_ax.plot(rounds, [_median(values) for values in times if values], color="C1", label="median over peers")
        time_ax.plot(rounds, [max(values) for values in times if values], color="C3", linestyle="--", linewidth=0.8,
                     label="slowest peer")
        time_ax.set_yscale("log")
        time_ax.set_xlabel("round")
        time_ax.set_ylabel("round wall time (ms, log scale)")
        time_ax.set_title("round time (round 1 includes the start-up)")
        time_ax.legend(frameon=False)
        figure.suptitle(title)
        figure.tight_layout()
        return _save(plt, figure, path)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
