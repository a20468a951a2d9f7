"""Report plots (matplotlib, no GUI backend): cumulative tokens saved across runs; accuracy per pass."""

from __future__ import annotations

from pathlib import Path

from flywheel.report.build import Report


def plot(report: Report, path: Path) -> Path:
    """Write a two-panel PNG to `path` and return it.

    Left: tokens saved (against measured baselines only), cumulative over runs in start order.
    Right: accuracy (problems with a verified answer / problems attempted) per run.
    """
    from matplotlib.figure import Figure  # a bare Figure needs no pyplot state nor a display

    path = Path(path)
    fig = Figure(figsize=(10, 4), dpi=100, layout="constrained")
    ax_saved, ax_acc = fig.subplots(1, 2)
    cum = report.cumulative_tokens_saved
    labels = [str(r) for r in cum["run_id"]]
    positions = list(range(len(labels)))
    ax_saved.plot(positions, cum["cumulative_tokens_saved"].tolist(), marker="o")
    ax_saved.set_title("cumulative tokens saved (vs measured baselines)")
    ax_saved.set_ylabel("tokens")
    accuracy = report.runs["accuracy"].astype("float64").fillna(0.0).tolist() if len(report.runs) else []
    ax_acc.bar(positions, accuracy)
    ax_acc.set_ylim(0, 1)
    ax_acc.set_title("accuracy per flywheel pass")
    ax_acc.set_ylabel("verified / problems")
    for ax in (ax_saved, ax_acc):
        ax.set_xticks(positions, labels, rotation=30, ha="right")
        ax.set_xlabel("run")
    if not labels:
        for ax in (ax_saved, ax_acc):
            ax.text(0.5, 0.5, "no runs recorded", ha="center", va="center", transform=ax.transAxes)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
