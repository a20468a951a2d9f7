from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flywheel import config
from flywheel.catalog import Catalog, open_catalog


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return tmp_path / "library"


@pytest.fixture
def catalog(library: Path) -> Iterator[Catalog]:
    cat = open_catalog(config.database_url(library))
    yield cat
    cat.close()
