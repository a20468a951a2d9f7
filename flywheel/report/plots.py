"""Report plots (matplotlib, no GUI backend): decode tokens without vs with the graft per problem; the learning curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    factor's two sides, all K attempts each), on a log axis. Right: the learning curve (`report.curve`):
    each run's first-attempt verified rate with its 95% interval, labelled as the curve labels it (a
    control is called a control), and decode tokens per verified answer on the right axis.
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

    _curve_panel(ax_acc, report)
    return fig


def _curve_panel(ax: Any, report: Report) -> None:
    curve = report.curve
    if curve.empty:
        ax.set_xticks([])
        ax.text(0.5, 0.5, "no runs recorded", ha="center", va="center", transform=ax.transAxes)
        return
    x = list(range(len(curve)))
    rate = curve["first_rate"].astype("float64").fillna(0.0).to_numpy()
    low = curve["first_low"].astype("float64").fillna(0.0).to_numpy()
    high = curve["first_high"].astype("float64").fillna(0.0).to_numpy()
    colors = ["#999999" if str(label).startswith("control") else "#2ca02c" for label in curve["label"]]
    bars = ax.bar(x, rate, color=colors, yerr=[rate - low, high - rate], capsize=3, ecolor="#444444")
    ax.bar_label(bars, labels=[f"{int(v)}/{int(n)}" for v, n in zip(curve["first_verified"], curve["problems"],
                                                                    strict=True)], padding=2, fontsize=8)
    ax.set_xticks(x, [str(label) for label in curve["label"]], rotation=30 if len(x) > 4 else 0,
                  ha="right" if len(x) > 4 else "center", fontsize=8)
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("first attempt verified (95% interval)")
    ax.set_title("learning curve: runs in the order they ran", fontsize=10)
    per = curve["decode_tokens_per_verified"].astype("float64")
    if per.notna().any():
        twin = ax.twinx()
        twin.plot(x, per.to_numpy(), color="#d62728", marker="o", linewidth=1.5)
        twin.set_ylabel("decode tokens per verified answer", color="#d62728")
        twin.set_ylim(0, float(per.max()) * 1.3)
