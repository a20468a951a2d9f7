"""No import cycle among the project's modules, read from the source with `ast` (nothing is
imported). Every import counts — module level, inside functions, under `TYPE_CHECKING` — because a
type-only import is still a dependency a reader has to hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flywheel", "flows", "verifiers")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    return {module_name(root, path): path
            for package in PACKAGES if (root / package).is_dir()
            for path in sorted((root / package).rglob("*.py"))}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that `name` (at `path`) imports anywhere in its source.

    `from pkg import x` depends on `pkg.x` when that is a module, else on `pkg` itself (a name its
    `__init__` defines). A package's `__init__` is not implied by importing one of its submodules:
    the graph is what a reader follows, not what the interpreter also runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


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
