"""The family registry: the one extension point for generated problem families.

Built-ins register themselves here exactly as a plug-in would:

    @family("ages", "how old someone will be", template="...", solution="...", axes=(...))
    def _ages(p: Params) -> Derived:
        return {"answer": ...}

The built-ins are entry points of the `kv_flywheel.families` group (`flywheel.plugins`), as another
package's families are: each names a module, and importing it registers its families. They load
on the first lookup.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from flywheel.families.base import Axis, Derived, Family, Kind, Params
from flywheel.plugins import Registry

#: Problem families by name; read it to load the plug-ins.
FAMILIES: Registry[Family] = Registry("kv_flywheel.families", "family", builtins=(
    ("kitchen", "flywheel.families.kitchen"), ("money", "flywheel.families.money"),
    ("motion", "flywheel.families.motion"), ("people", "flywheel.families.people"),
    ("symbolic", "flywheel.families.symbolic")))


def register(fam: Family) -> Family:
    """Add `fam` to the registry; a name can be registered once."""
    if not fam.name.isidentifier() or fam.name in ("all",):
        raise ValueError(f"family name {fam.name!r} must be an identifier other than 'all'")
    return FAMILIES.add(fam.name, fam, origin=fam.compute.__module__)


def family(name: str, description: str, *, template: str, solution: str, axes: tuple[Axis, ...],
           kind: Kind = "word", legacy: Callable[[random.Random], Params] | None = None,
           ) -> Callable[[Callable[[Params], Derived]], Callable[[Params], Derived]]:
    """Decorator form of `register`: the decorated function is the family's `compute`."""
    def wrap(compute: Callable[[Params], Derived]) -> Callable[[Params], Derived]:
        register(Family(name, description, template, solution, axes, compute, kind, legacy))
        return compute
    return wrap


def word_families() -> list[Family]:
    """The word-problem families in name order: what `gen:all` draws from."""
    return [f for _, f in sorted(FAMILIES.items()) if f.kind == "word"]


def builtin_word_families() -> list[Family]:
    """The word families kv-flywheel itself ships, in name order (never a plug-in's).

    What the starter library is made from: a family's check is circular (its answer is its own
    generator's reference), so only the project's own, tested generators may seed verified knowledge.
    """
    return [f for f in word_families() if FAMILIES.builtin(f.name)]
