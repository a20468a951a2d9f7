"""The savings report: SQL views over the catalog, shaped with pandas, rendered or plotted.

Example:
    >>> from flywheel.catalog import open_catalog
    >>> from flywheel.report import build_report, render
    >>> report = build_report(open_catalog(url))            # doctest: +SKIP
    >>> print(render(report, "md"))                          # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flywheel.report.formats import FORMATS, Format

if TYPE_CHECKING:
    from flywheel.report.build import (
        ATTEMPT_COLUMNS,
        ROW_COLUMNS,
        SCHEMA,
        Report,
        build_report,
        context_window_of,
    )
    from flywheel.report.figures import DEFINITIONS, PROBLEM_COLUMNS
    from flywheel.report.output import render
    from flywheel.report.plots import plot

#: Where each lazily imported name lives (pandas and SQLAlchemy load only when a report is built,
#: so `flywheel --help` and the other sub-commands start fast).
_LAZY = {"DEFINITIONS": "figures", "PROBLEM_COLUMNS": "figures", "ATTEMPT_COLUMNS": "build", "ROW_COLUMNS": "build", "SCHEMA": "build", "Report": "build",
         "build_report": "build", "context_window_of": "build", "plot": "plots", "render": "output"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"flywheel.report.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'flywheel.report' has no attribute {name!r}")

__all__ = ["ATTEMPT_COLUMNS", "DEFINITIONS", "FORMATS", "PROBLEM_COLUMNS", "ROW_COLUMNS", "SCHEMA", "Format", "Report", "build_report",
           "context_window_of", "plot", "render"]
