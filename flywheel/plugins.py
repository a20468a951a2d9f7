"""Plug-ins: registries another installed package can add to through Python entry points.

Four registries read one entry-point group each, on their first lookup or listing (never at
`import flywheel`), once per process:

| group                        | registry                          | an entry point names                      |
|------------------------------|-----------------------------------|-------------------------------------------|
| `kv_flywheel.models`         | `flywheel.modelzoo.PACKAGED`      | a `PackagedModel` named as the entry is   |
| `kv_flywheel.prompt_formats` | `flywheel.prompts.PROMPT_FORMATS` | a factory `(tokenizer, model) -> PromptFormat`, registered under the entry's name |
| `kv_flywheel.sources`        | `flywheel.sources.SOURCES`        | a module; importing it registers (`@source`) |
| `kv_flywheel.families`       | `flywheel.families.FAMILIES`      | a module; importing it registers (`@family`) |

The built-ins are entry points of kv-flywheel's own distribution and load first, through the same
code; a built-in missing from the installed metadata (an install older than its pyproject) is
loaded from the registry's `builtins` table instead, so they are always there. A plug-in that
fails (import error, an exception while registering, `sys.exit()`, an object of the wrong type) is
reported on stderr in one line and skipped with whatever it had registered (Ctrl-C still stops); a name already registered is
refused in one line naming both providers, and the first stays. See docs/plugins.md.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

#: The distribution whose entry points are the built-ins (they load before any other's).
OWN_DIST = "kv-flywheel"

T = TypeVar("T")
#: What a registry does with an entry point's object: register it under the entry's name, or raise.
Accept = Callable[[str, Any], object]


def _normalized(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


@dataclass
class _Loading:
    """The entry point being loaded: who it is, and what it has registered so far (undone if it fails)."""

    label: str
    group: str
    added: list[tuple[Registry[Any], str]] = field(default_factory=list)


#: Entry points being loaded, innermost last (a plug-in may register into another group's registry).
_LOADING: list[_Loading] = []


def _report(line: str) -> None:
    print(f"flywheel: {line}", file=sys.stderr, flush=True)


class Registry(Mapping[str, T]):
    """Names to entries of one kind, filled by built-ins and plug-ins of one entry-point group.

    Reading it (`reg[name]`, `name in reg`, iterating) loads the group first, once; registering
    (`add`) does not, so importing a built-in module directly loads nothing else. A plug-in that
    registers into another group's registry (a source module that adds a family) does so after that
    group's built-ins.
    """

    def __init__(self, group: str, what: str, *, builtins: tuple[tuple[str, str], ...],
                 accept: Accept | None = None) -> None:
        self.group = group        # entry-point group, e.g. "kv_flywheel.sources"
        self.what = what          # what one entry is called in messages, e.g. "problem source"
        self.builtins = builtins  # (entry name, "module[:attr]"): the pyproject table, for a stale install
        self.accept = accept      # None: an entry point names a module, and importing it registers
        self._entries: dict[str, T] = {}
        self._providers: dict[str, str] = {}   # name -> who registered it
        self._origins: dict[str, str] = {}     # name -> the module that defines it (orders the listing)
        self._loaded = False            # the whole group loaded (a read does it)
        self._builtins_loaded = False   # its built-ins loaded (a plug-in registering into it does it)
        self._done: set[tuple[str, str, str]] = set()   # (dist, name, value) of entry points loaded

    # -- reading (loads the group first) --------------------------------------------------------

    def __getitem__(self, name: str) -> T:
        self.load()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        """Built-ins in the table's order, then the others as registered.

        A built-in module imported directly (flows importing the inbox) registers before the group
        loads; listings still follow the table, never the order modules happened to be imported in.
        """
        self.load()
        rank = {value.split(":")[0]: i for i, (_, value) in enumerate(self.builtins)}
        seq = {name: i for i, name in enumerate(self._entries)}
        return iter(sorted(self._entries, key=lambda name: (rank.get(self._origins.get(name, ""), len(rank)), seq[name])))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def provider(self, name: str) -> str:
        """Who registered `name`: `plugin 'x' from 'dist'`, or the module that registered it directly."""
        return self._providers.get(name, "?")

    def builtin(self, name: str) -> bool:
        """Whether `name` was registered by a module of kv-flywheel's own table (not by a plug-in)."""
        self.load()
        modules = {value.split(":")[0] for _, value in self.builtins}
        return name in self._entries and self._origins.get(name) in modules

    def present(self) -> list[T]:
        """The entries registered so far, loading no plug-in (for a register function's own checks)."""
        self._builtins_first()
        return list(self._entries.values())

    # -- registering ------------------------------------------------------------------------------

    def add(self, name: str, entry: T, *, origin: str) -> T:
        """Register `entry` under `name`; `origin` is the module that defines it (named in messages).

        A name registered already is refused: during a plug-in's load with one line (the first
        stays, the plug-in goes on), else with ValueError.
        """
        self._builtins_first()
        if name in self._entries:
            self.refuse(f"{self.what} {name!r} is already registered", name)
            return entry
        self._entries[name] = entry
        self._origins[name] = origin
        self._providers[name] = _LOADING[-1].label if _LOADING else f"module {origin!r}"
        if _LOADING:
            _LOADING[-1].added.append((self, name))
        return entry

    def refuse(self, message: str, holder: str) -> None:
        """Refuse a registration that clashes with `holder`'s: one line during a plug-in's load, else ValueError."""
        message = f"{message} by {self.provider(holder)}"
        if not _LOADING:
            raise ValueError(message)
        loading = _LOADING[-1]
        _report(f"{loading.label} (group {loading.group}) refused: {message}; the first stays")

    # -- loading ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Load the group's entry points, once: the built-ins, then the others by distribution and name."""
        if self._loaded:
            return
        self._loaded = True
        self._load_builtins()
        others = [ep for ep in importlib.metadata.entry_points(group=self.group) if not _own(ep)]
        for ep in sorted(others, key=lambda ep: (_normalized(_dist_name(ep)), ep.name)):
            self._load_one(ep, _dist_name(ep))

    def refresh(self) -> None:
        """Look for entry points again at the next read (one already loaded is not loaded twice)."""
        self._loaded = self._builtins_loaded = False

    def _builtins_first(self) -> None:
        """A plug-in registering into another group's registry goes after that group's built-ins."""
        if _LOADING:
            self._load_builtins()

    def _load_builtins(self) -> None:
        """kv-flywheel's own entry points; those its installed metadata lacks, from `builtins`."""
        if self._builtins_loaded:
            return
        self._builtins_loaded = True
        own = {ep.name: ep for ep in _own_entry_points(self.group)}
        for name, value in self.builtins:   # in the table's order: listings do not follow metadata's order
            if name in own:
                self._load_one(own.pop(name), OWN_DIST)
            else:
                self._load_one(importlib.metadata.EntryPoint(name, value, self.group), OWN_DIST, fallback=True)
        for ep in own.values():              # declared in metadata but not in the table (a newer install)
            self._load_one(ep, OWN_DIST)

    def _load_one(self, ep: importlib.metadata.EntryPoint, dist: str, *, fallback: bool = False) -> None:
        """Load one entry point; a failure is one line on stderr, and what it registered is undone."""
        key = (_normalized(dist), ep.name, ep.value)
        if key in self._done:
            return
        self._done.add(key)
        where = f"{dist!r} (built-in, missing from its installed metadata)" if fallback else repr(dist)
        loading = _Loading(f"plugin {ep.name!r} from {where}", self.group)
        _LOADING.append(loading)
        try:
            obj = ep.load()
            if self.accept is not None:
                self.accept(ep.name, obj)
            elif not isinstance(obj, types.ModuleType):
                raise TypeError(f"{ep.value} is a {type(obj).__name__}, not the module this group's entry points name")
            else:   # imported before (a module importing a built-in source): its entries are this plug-in's
                direct = f"module {obj.__name__!r}"
                self._providers.update({name: loading.label for name, p in self._providers.items() if p == direct})
        except KeyboardInterrupt:  # Ctrl-C still stops the command
            raise
        except BaseException as err:   # a plug-in's failure (sys.exit() too) never breaks the built-ins or the command
            for registry, name in loading.added:
                registry._entries.pop(name, None)
                registry._providers.pop(name, None)
                registry._origins.pop(name, None)
            _report(f"{loading.label} (group {self.group}) could not be loaded: {type(err).__name__}: {err}")
        finally:
            _LOADING.pop()

    @contextmanager
    def isolated(self) -> Iterator[None]:
        """Undo on exit whatever is registered or loaded inside (for tests).

        The group is loaded first: a built-in module imports once, so its entries must be in the
        state kept.
        """
        self.load()
        entries, providers, origins, done = dict(self._entries), dict(self._providers), dict(self._origins), set(self._done)
        try:
            yield
        finally:
            self._entries, self._providers, self._origins, self._done = entries, providers, origins, done
            self._loaded = self._builtins_loaded = True


def _own_entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """kv-flywheel's entry points in `group`, from the first copy of its metadata on the path only
    (an editable install leaves a second, `kv_flywheel.egg-info` in the checkout, which must not add to it)."""
    try:
        return list(importlib.metadata.distribution(OWN_DIST).entry_points.select(group=group))
    except importlib.metadata.PackageNotFoundError:
        return []


def _own(ep: importlib.metadata.EntryPoint) -> bool:
    return _normalized(_dist_name(ep)) == OWN_DIST


def _dist_name(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.name) if dist is not None and dist.name else "?"


def call_plugin(what: str, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` for a registered entry (a source's loader, a format's factory): anything it raises, a
    `SystemExit` too, becomes one `InputError` naming `what` (a FlywheelError passes as it is; Ctrl-C stops;
    an OSError naming a file is the user's path or disk, not the plug-in's bug: it passes, and the command
    says it in one line with the path)."""
    from flywheel.errors import FlywheelError, InputError

    try:
        return fn(*args)
    except (KeyboardInterrupt, FlywheelError):
        raise
    except OSError as err:
        if err.filename is None:
            raise InputError(f"{what} failed: {type(err).__name__}: {err}"[:500],
                             hint="a plug-in's bug: fix or uninstall the package that provides it") from None
        raise
    except BaseException as err:
        raise InputError(f"{what} failed: {type(err).__name__}: {err}"[:500],
                         hint="a plug-in's bug: fix or uninstall the package that provides it") from None
