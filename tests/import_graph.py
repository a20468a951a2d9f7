"""Reading a module's imports from its source with `ast` (nothing is imported), for the layering
tests (`test_import_layers.py`, `test_layering.py`): every import counts, at module level, inside a
function or under `TYPE_CHECKING`, and a relative one is resolved against its package."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """`root/flywheel/kv/graft.py` -> `flywheel.kv.graft`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(root: Path, path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module, names taken from it) of every import statement in `path`, at any depth.

    `import a.b, c` gives one row per module with no names; `from .x import y, z` gives the
    resolved `pkg.x` with `["y", "z"]` (each may be a submodule or a name the module defines)."""
    package = ".".join(path.relative_to(root).parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, [alias.name for alias in node.names]
