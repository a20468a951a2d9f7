"""The savings report: SQL views over the catalog, shaped with pandas, rendered or plotted.

Example:
    >>> from flywheel.catalog import open_catalog
    >>> from flywheel.report import build_report, render
    >>> report = build_report(open_catalog(url))            # doctest: +SKIP
    >>> print(render(report, "md"))                          # doctest: +SKIP
"""

from __future__ import annotations

from flywheel.report.build import DEFINITIONS, ROW_COLUMNS, SCHEMA, Report, build_report, context_window_of
from flywheel.report.plots import plot
from flywheel.report.render import FORMATS, Format, render

__all__ = ["DEFINITIONS", "FORMATS", "ROW_COLUMNS", "SCHEMA", "Format", "Report", "build_report",
           "context_window_of", "plot", "render"]
