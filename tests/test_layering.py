"""The layers, read from the source with `ast` (nothing is imported): `verifiers` stands alone, and the
core (`flywheel`, below the flows) never reaches into `flows`. Where each unit sits, the CLI on top of the
flows included, is the floor table of docs/architecture.md (tests/test_import_layers.py): no exceptions."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.import_graph import import_statements
from tests.test_import_layers import ARCHITECTURE, floors

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(root: Path, path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in `path`, at any depth (lazy imports too)."""
    for line, module, names in import_statements(root, path):
        yield line, module
        for alias in names:     # `from flywheel import x` may name a module
            yield line, f"{module}.{alias}"


def violations(package: str, forbidden: tuple[str, ...], root: Path = ROOT,
               above: tuple[str, ...] = ()) -> list[str]:
    """`path:line imports module` for each import of a `forbidden` package under `root/package`, leaving out
    the subpackages `above` (units the floor table puts over the forbidden ones)."""
    found: dict[str, str] = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(f"{unit.replace('.', '/')}/") for unit in above):
            continue
        for line, module in imported_modules(root, path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.setdefault(f"{rel}:{line}", module)   # one report per import statement
    return [f"{where} imports {module}" for where, module in found.items()]


def test_the_source_trees_are_where_the_check_looks() -> None:
    for package in ("verifiers", "flywheel", "flows", "flywheel/cli"):
        assert (ROOT / package / "__init__.py").is_file()


def test_verifiers_import_nothing_of_flywheel_or_flows() -> None:
    assert violations("verifiers", ("flywheel", "flows")) == []


def units_above_the_flows() -> tuple[str, ...]:
    """The `flywheel` units docs/architecture.md puts on a floor over `flows` (today: the CLI alone)."""
    floor_of = floors(ARCHITECTURE.read_text())
    return tuple(unit for unit, floor in floor_of.items()
                 if unit.startswith("flywheel.") and floor > floor_of["flows"])


def test_the_core_below_the_flows_never_imports_them() -> None:
    above = units_above_the_flows()
    assert above == ("flywheel.cli",)   # the layout: the command line is the one floor over the flows
    assert violations("flywheel", ("flows",), above=above) == []


@pytest.mark.parametrize("module", ["flywheel.domain", "flywheel.problemsets", "flywheel.catalog", "verifiers"])
def test_domain_modules_load_without_torch(module: str) -> None:
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("where", "source"), [
    ("flywheel/kv/probe.py", "import flows.run\n"),
    ("flywheel/kv/probe.py", "def f():\n    from flows import runtime\n"),   # a lazy import
    ("flywheel/__init__.py", "from flows.tasks import verify as v\n"),
    ("flywheel/kv/probe.py", "import os, flows\n"),
])
def test_the_check_sees_every_kind_of_import(tmp_path: Path, where: str, source: str) -> None:
    probe = tmp_path / where
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(source)
    (tmp_path / "flywheel" / "cli").mkdir(exist_ok=True)
    (tmp_path / "flywheel" / "kv").mkdir(exist_ok=True)
    (tmp_path / "flywheel" / "cli" / "run.py").write_text("from flows import runtime\n")   # allowed
    (tmp_path / "flywheel" / "kv" / "fine.py").write_text("from ..catalog import api\nfrom . import graft\n")
    found = violations("flywheel", ("flows",), root=tmp_path, above=("flywheel.cli",))
    assert len(found) == 1 and found[0].startswith(f"{where}:")


def test_relative_imports_resolve_against_their_package(tmp_path: Path) -> None:
    (tmp_path / "verifiers" / "sub").mkdir(parents=True)
    (tmp_path / "verifiers" / "sub" / "m.py").write_text("from .. import core\nfrom ...flywheel import engine\n")
    modules = {m for _, m in imported_modules(tmp_path, tmp_path / "verifiers" / "sub" / "m.py")}
    assert {"verifiers", "verifiers.core", "flywheel", "flywheel.engine"} <= modules
