"""The floors of docs/architecture.md, and no import cycle, read from the source with `ast` (nothing
is imported). Every import counts — module level, inside functions, under `TYPE_CHECKING` — because
a type-only import is still a dependency a reader has to hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.import_graph import import_statements, module_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flywheel", "flows", "verifiers")
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    return {module_name(root, path): path
            for package in PACKAGES if (root / package).is_dir()
            for path in sorted((root / package).rglob("*.py"))}


def imports_of(root: Path, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that the module at `path` (under `root`) imports anywhere in its source.

    `from pkg import x` depends on `pkg.x` when that is a module, else on `pkg` itself (a name its
    `__init__` defines). A package's `__init__` is not implied by importing one of its submodules:
    the graph is what a reader follows, not what the interpreter also runs."""
    found: set[str] = set()
    for _, module, names in import_statements(root, path):
        if not names:
            found.add(module)
        for alias in names:
            found.add(f"{module}.{alias}" if f"{module}.{alias}" in modules else module)
    return {m for m in found if m in modules and m != module_name(root, path)}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imports_of(root, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path `[a, b, ..., a]`, or None. Iterative DFS, deterministic order."""
    state: dict[str, int] = {}        # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected knot: remove an edge of each found cycle and look again."""
    graph = {k: set(v) for k, v in graph.items()}
    cycles = []
    while (cycle := find_cycle(graph)) is not None:
        cycles.append(cycle)
        graph[cycle[-2]].discard(cycle[-1])
    return cycles


def test_the_graph_sees_the_packages() -> None:
    graph = import_graph()
    assert {"flywheel.library", "flows.run", "verifiers.core"} <= graph.keys()
    assert "flywheel.catalog" in graph["flows.tasks"] or any(
        m.startswith("flywheel.catalog") for m in graph["flows.tasks"])


def test_no_import_cycle() -> None:
    cycles = all_cycles(import_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize(("files", "cycle"), [
    ({"flywheel/a.py": "from flywheel import b\n", "flywheel/b.py": "import flywheel.a\n"},
     ["flywheel.a", "flywheel.b", "flywheel.a"]),
    ({"flywheel/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n",
      "flywheel/b.py": "def f():\n    from .a import Y\n"},                  # type-only and lazy
     ["flywheel.a", "flywheel.b", "flywheel.a"]),
    ({"flywheel/kv/__init__.py": "from .graft import G\n",
      "flywheel/kv/graft.py": "from flywheel.kv import other\n",
      "flywheel/kv/other.py": "from .. import kv\n"},                          # through a package
     ["flywheel.kv", "flywheel.kv.graft", "flywheel.kv.other", "flywheel.kv"]),
    ({"flywheel/a.py": "from flywheel import b\n", "flywheel/b.py": "import os\n"}, None),
])
def test_the_check_finds_a_cycle_of_every_kind(tmp_path: Path, files: dict[str, str],
                                               cycle: list[str] | None) -> None:
    (tmp_path / "flywheel").mkdir()
    (tmp_path / "flywheel" / "__init__.py").write_text("")
    for rel, source in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(source)
    assert find_cycle(import_graph(tmp_path)) == cycle


# --- floors ---------------------------------------------------------------------------------------


def unit_of(module: str) -> str:
    """`verifiers.parse` -> `verifiers`; `flywheel.catalog.api` -> `flywheel.catalog`; `flywheel` -> `flywheel`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "flywheel" else parts[0]


def floors(doc: str) -> dict[str, int]:
    """Unit -> floor, from the rows `| <floor> | `unit` `unit` ... | ... |` of the architecture table."""
    found: dict[str, int] = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for unit in re.findall(r"`([\w.]+)`", cells[1]):
                assert unit not in found, f"{unit} is on two floors in docs/architecture.md"
                found[unit] = int(cells[0])
    return found


def upward_imports(graph: dict[str, set[str]], floor_of: dict[str, int]) -> list[str]:
    """`a (floor n) imports b (floor m > n)` for each import that goes up; a unit without a floor is named."""
    found = []
    for module, deps in sorted(graph.items()):
        here = floor_of.get(unit_of(module))
        if here is None:
            found.append(f"{module}: unit {unit_of(module)} has no floor in docs/architecture.md")
            continue
        for dep in sorted(deps):
            there = floor_of.get(unit_of(dep))
            if there is not None and there > here:
                found.append(f"{module} (floor {here}) imports {dep} (floor {there})")
    return found


def test_every_import_goes_down_the_documented_floors() -> None:
    floor_of = floors(ARCHITECTURE.read_text())
    assert {"verifiers", "flywheel.domain", "flywheel.library", "flows", "flywheel.cli"} <= floor_of.keys()
    problems = upward_imports(import_graph(), floor_of)
    assert problems == [], "imports against docs/architecture.md:\n" + "\n".join(problems)


def test_the_floor_check_sees_an_upward_import_and_an_unplaced_unit(tmp_path: Path) -> None:
    files = {"flywheel/__init__.py": "", "flywheel/domain.py": "from flywheel.library import x\n",
             "flywheel/library/__init__.py": "def f():\n    from flywheel import domain\n",
             "flywheel/newcomer.py": ""}
    for rel, source in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(source)
    table = "| floor | units | what |\n|---|---|---|\n| 1 | `flywheel` `flywheel.domain` | a |\n| 4 | `flywheel.library` | b |\n"
    assert upward_imports(import_graph(tmp_path), floors(table)) == [
        "flywheel.domain (floor 1) imports flywheel.library (floor 4)",
        "flywheel.newcomer: unit flywheel.newcomer has no floor in docs/architecture.md",
    ]
