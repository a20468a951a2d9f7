"""Report plots (matplotlib, no GUI backend): decode tokens without vs with the graft per problem; accuracy per pass."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure  # a bare Figure needs no pyplot state nor a display

from flywheel.report.build import Report
from flywheel.report.output import abbreviate

#: Problems drawn at most (the first ones, in run order); the rest are named in the panel's title.
MAX_PROBLEMS = 24
LABEL_CHARS = 14  # a problem id on the axis keeps both ends around "…"


def plot(report: Report, path: Path) -> Path:
    """Write `figure(report)` as a PNG to `path` and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(report).savefig(path, format="png")
    return path


def figure(report: Report) -> Figure:
    """The two-panel report figure.

    Left: per problem with a measured baseline, decode tokens without vs with the graft (the decode
    factor's two sides, all K attempts each), on a log axis. Right: accuracy (problems verified /
    problems attempted) per run, labelled `pass 1`, `pass 2`, ... in start order.
    """
    import numpy as np

    fig = Figure(figsize=(11, 4.5), dpi=100, layout="constrained")
    ax_tok, ax_acc = fig.subplots(1, 2, width_ratios=[3, 2])
    measured = report.problems[report.problems["decode_tokens_without"].notna()]
    shown = measured.head(MAX_PROBLEMS)
    x = np.arange(len(shown))
    if len(shown):
        without = shown["decode_tokens_without"].astype("float64").to_numpy()
        with_ = shown["decode_tokens_with"].astype("float64").clip(lower=0.5).to_numpy()  # 0 on a log axis
        bars = [ax_tok.bar(x - 0.2, without, 0.4, label="without graft", color="#999999"),
                ax_tok.bar(x + 0.2, with_, 0.4, label="with graft", color="#1f77b4")]
        ax_tok.set_yscale("log")
        ax_tok.set_ylim(0.8, max(10.0, float(without.max())) * 4)   # room above for labels and the legend
        ax_tok.set_xlim(-0.7, max(len(shown), 4) - 0.3)               # one problem is not one wide slab
        if len(shown) <= 12:  # counts on the bars while they fit side by side
            for group, values in zip(bars, (without, shown["decode_tokens_with"].to_numpy()), strict=True):
                ax_tok.bar_label(group, labels=[f"{v:,.0f}" for v in values], fontsize=7, padding=1)
        ax_tok.set_xticks(x, [abbreviate(str(p), LABEL_CHARS) for p in shown["problem_id"]],
                          rotation=45 if len(shown) > 4 else 0, ha="right" if len(shown) > 4 else "center",
                          fontsize=8)
        ax_tok.legend(loc="upper right", fontsize=8)
    else:
        ax_tok.set_xticks([])
        ax_tok.text(0.5, 0.5, "no problem with a measured baseline\n(run them with --no-graft first)",
                    ha="center", va="center", transform=ax_tok.transAxes, color="gray")
    more = len(measured) - len(shown)
    no_base = int(report.problems.loc[report.problems["decode_tokens_without"].isna(), "problem_id"].nunique())
    title = "decode tokens per problem, without vs with the graft"
    notes = [f"{more} more not drawn" if more > 0 else "", f"{no_base} grafted problem{'s' if no_base != 1 else ''} with no baseline" if no_base else ""]
    if any(notes):
        title += "\n(" + "; ".join(n for n in notes if n) + ")"
    ax_tok.set_title(title, fontsize=10)
    ax_tok.set_ylabel("decode tokens (log)")

    runs = report.runs
    labels = [f"pass {i + 1}" for i in range(len(runs))]
    positions = list(range(len(labels)))
    accuracy = runs["accuracy"].astype("float64").fillna(0.0).tolist() if len(runs) else []
    bars = ax_acc.bar(positions, accuracy, color="#2ca02c")
    if labels:  # 0/4 is a result: say so on the bar, which has no height to show it
        ax_acc.bar_label(bars, labels=[f"{int(s)}/{int(p)}" for s, p in zip(runs["verified"], runs["problems"],
                                                                             strict=True)], padding=2)
        ax_acc.set_xticks(positions, labels)
    else:
        ax_acc.set_xticks([])
        ax_acc.text(0.5, 0.5, "no runs recorded", ha="center", va="center", transform=ax_acc.transAxes)
    ax_acc.set_ylim(0, 1.15)
    ax_acc.set_title("accuracy per flywheel pass", fontsize=10)
    ax_acc.set_ylabel("verified / problems")
    return fig
