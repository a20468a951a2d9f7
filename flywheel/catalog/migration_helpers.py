"""What several migrations share: dropping a column under the report views on SQLite.

SQLite drops a column by rebuilding its table (`batch_alter_table`) and refuses while a view
names that table, so a downgrade that drops a `runs` or `attempts` column removes the report
views of 0002 first and creates them again after. The views are 0002's own code, loaded from its
file (the migrations folder is not a package), so they are exactly what 0002 created.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

_VERSIONS = Path(__file__).with_name("migrations") / "versions"


def _report_views_0002() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_views_0002", _VERSIONS / "0002_report_views.py")
    assert spec is not None and spec.loader is not None
    views = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(views)
    return views


@contextmanager
def without_report_views() -> Iterator[None]:
    """Drop 0002's report views for the body (a table rebuild), then create them again."""
    views = _report_views_0002()
    views.downgrade()
    yield
    views.upgrade()
