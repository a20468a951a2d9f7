"""Report plots (matplotlib, no GUI backend): cumulative tokens saved across runs; accuracy per pass."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure  # a bare Figure needs no pyplot state nor a display

from flywheel.report.build import Report


def plot(report: Report, path: Path) -> Path:
    """Write `figure(report)` as a PNG to `path` and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(report).savefig(path, format="png")
    return path


def figure(report: Report) -> Figure:
    """The two-panel report figure.

    Left: tokens saved (against measured baselines only), cumulative over runs in start order.
    Right: accuracy (problems with a verified answer / problems attempted) per run.
    """
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10, 4), dpi=100, layout="constrained")
    ax_saved, ax_acc = fig.subplots(1, 2)
    runs = report.runs
    labels = [str(r) for r in runs["run_id"]] if len(runs) else []
    positions = list(range(len(labels)))
    # Cumulative saving only through runs with a measured baseline; a run without one is marked
    # "no baseline", never drawn as 0 tokens saved. Passes are separate points, not a line.
    saved = runs["tokens_saved"].tolist() if len(runs) else []
    total, xs, ys = 0.0, [], []
    for x, value in zip(positions, saved, strict=True):
        if value is None or value != value:  # None or NaN: no measured baseline
            ax_saved.annotate("no baseline", (x, 0), xytext=(0, 4), textcoords="offset points", ha="center",
                              fontsize=8, color="gray", rotation=90, va="bottom")
            continue
        total += float(value)
        xs.append(x)
        ys.append(total)
    ax_saved.plot(xs, ys, marker="o", linestyle="none")
    ax_saved.set_title("cumulative tokens saved (vs measured baselines)")
    ax_saved.set_ylabel("tokens")
    ax_saved.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_saved.set_ylim(bottom=0)
    accuracy = runs["accuracy"].astype("float64").fillna(0.0).tolist() if len(runs) else []
    bars = ax_acc.bar(positions, accuracy)
    if labels:  # 0/4 is a result: say so on the bar, which has no height to show it
        ax_acc.bar_label(bars, labels=[f"{int(s)}/{int(p)}" for s, p in zip(runs["solved"], runs["problems"],
                                                                             strict=True)], padding=2)
    ax_acc.set_ylim(0, 1.1)
    ax_acc.set_title("accuracy per flywheel pass")
    ax_acc.set_ylabel("verified / problems")
    for ax in (ax_saved, ax_acc):
        ax.set_xticks(positions, labels, rotation=30, ha="right")
        ax.set_xlabel("run")
    if not labels:
        for ax in (ax_saved, ax_acc):
            ax.text(0.5, 0.5, "no runs recorded", ha="center", va="center", transform=ax.transAxes)
    return fig
