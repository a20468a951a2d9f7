"""The source registry: the one extension point for where problem sets come from.

Built-ins register themselves here exactly as a plug-in would:

    @source("champ", prefix="champ", keys=("n",), example="champ?n=6", description="...")
    def _champ(spec: Spec) -> Loaded:
        return problems, skipped

A prefix ending in `:` claims every spec that starts with it (`gen:ages?n=5`); a bare word claims
that word alone, with or without a query (`champ`, `champ?n=6`), so a file called `champions.csv`
stays a file. The source registered with the empty prefix (files) takes whatever no other claims,
query and all: a path may contain `?`.

The built-ins are entry points of the `kv_flywheel.sources` group (`flywheel.plugins`), as another
package's sources are: each names a module, and importing it registers its sources. They load on
the first lookup, in pyproject order: `champ`, files, `gen:`, `gsm-symbolic:`, `inbox:`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from flywheel.errors import InputError
from flywheel.plugins import Registry
from flywheel.sources.problem import Problem
from flywheel.sources.spec import Spec, check_keys, split_query

#: What a source's loader returns: the problems, and what it skipped, each entry naming what and why.
Loaded = tuple[list[Problem], list[str]]
Loader = Callable[[Spec], Loaded]


@dataclass(frozen=True)
class Source:
    """One registered source: how a spec names it, the query keys it reads, and its loader."""

    name: str
    prefix: str                 # "gen:" claims "gen:...", "champ" claims "champ[?...]", "" the rest
    keys: tuple[str, ...]       # query keys it reads; any other is refused before loading
    example: str                # a spec that works, shown in hints
    description: str
    load: Loader

    def claims(self, spec: str) -> bool:
        """Whether `spec` names this source (the fallback claims nothing by name)."""
        if not self.prefix:
            return False
        if self.prefix.endswith(":"):
            return spec.startswith(self.prefix)
        return spec == self.prefix or spec.startswith(self.prefix + "?")


#: Problem sources by name, in registration order (built-ins first); read it to load the plug-ins.
SOURCES: Registry[Source] = Registry("kv_flywheel.sources", "problem source", builtins=(
    ("champ", "flywheel.sources.champ"), ("files", "flywheel.sources.files"),
    ("gen", "flywheel.sources.generated"), ("gsm-symbolic", "flywheel.sources.gsm_symbolic"),
    ("inbox", "flywheel.sources.inbox")))


def register(src: Source) -> Source:
    """Add `src`; a name and a prefix can each be registered once, and one source may be the fallback."""
    if not re.fullmatch(r"([a-z][a-z0-9-]*:?)?", src.prefix):
        raise ValueError(f"problem source prefix {src.prefix!r} must be a lower-case word, optionally ending in ':'")
    claimed = next((s for s in SOURCES.present() if s.prefix == src.prefix), None)
    if claimed is not None and claimed.name != src.name:
        SOURCES.refuse(f"problem source prefix {src.prefix!r} is already claimed", claimed.name)
        return src
    return SOURCES.add(src.name, src, origin=src.load.__module__)


def source(name: str, *, prefix: str, keys: tuple[str, ...], example: str,
           description: str) -> Callable[[Loader], Loader]:
    """Decorator form of `register`: the decorated function is the source's loader."""
    def wrap(load: Loader) -> Loader:
        register(Source(name, prefix, keys, example, description, load))
        return load
    return wrap


def resolve(spec: str) -> tuple[Source, Spec]:
    """The source that claims `spec`, and the spec split for it (its query keys checked).

    Raises:
        InputError: a key given twice or one the source does not read; no source at all.
    """
    for src in SOURCES.values():
        if src.claims(spec):
            base, query = split_query(spec)
            check_keys(query, src.keys, spec, example=src.example)
            return src, Spec(spec, base[len(src.prefix):], query)
    fallback = [s for s in SOURCES.values() if not s.prefix]
    if not fallback:
        raise InputError(f"no problem source claims {spec!r}; the sources are:", listing=describe_sources().splitlines())
    return fallback[0], Spec(spec, spec, {})


def describe_sources() -> str:
    """One line per registered source: how to name it, an example, what it is."""
    def label(s: Source) -> str:
        return s.prefix if s.prefix else "PATH"

    ordered = sorted(SOURCES.values(), key=lambda s: not s.prefix)   # registration order, the fallback last
    width = max((len(label(s)) for s in ordered), default=0)
    return "\n".join(f"  {label(s):<{width}}  {s.description} (e.g. {s.example})" for s in ordered)
