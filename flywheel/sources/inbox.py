"""A stream of problems: a folder (the inbox) whose files arrive over time; each run takes what no run took.

Spec: `inbox:DIR?take=N&retries=R`. DIR holds `.jsonl`, `.csv` and `.parquet` files with the columns of a
problem file (`flywheel.sources.files`: id, problem, reference, solution). Arrival order is the files'
modification time (then name), rows in file order; an id seen earlier in that order is skipped and named.

Loading the spec lists every problem the inbox holds. A run takes its share with `take`: under a lock on
the folder, the first `take` problems (default all) that no run is working on, that none verified, and
that have failed fewer than `retries` + 1 times (default 0: never retried) are claimed for that run in
the folder's ledger (`.flywheel/claims.jsonl`, one JSON line a claim, append-only). So two runs never
take the same problem, and a run resumed by its id takes exactly what it claimed before (`take` returns
its own claims). What a claim became is read from the catalog, not the ledger (`RunOutcome`): a claim by
a run that recorded no attempt for it and is no longer running (killed, interrupted) frees the problem
again without counting as a try.

    >>> take("inbox:./inbox?take=20", "run-2", outcome)   # doctest: +SKIP
    ProblemSet(spec='inbox:./inbox?take=20', problems=[... the next 20 ...])
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from flywheel.errors import InputError
from flywheel.sources.files import load_file
from flywheel.sources.problem import Problem, ProblemSet
from flywheel.sources.registry import Loaded, source
from flywheel.sources.spec import Spec

PREFIX = "inbox:"
#: The folder inside an inbox that holds its ledger and lock (never read as problems).
STATE_DIR = ".flywheel"
SUFFIXES = (".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class RunOutcome:
    """What the catalog says of one run: whether it still runs, which problems it attempted and verified."""

    running: bool
    attempted: frozenset[str] = field(default_factory=frozenset)
    verified: frozenset[str] = field(default_factory=frozenset)


#: run id -> its outcome (None: the catalog does not know the run, e.g. it died before being opened).
Outcomes = Callable[[str], RunOutcome | None]


@dataclass(frozen=True)
class InboxSpec:
    folder: Path
    take: int | None
    retries: int

    @classmethod
    def of(cls, spec: Spec | str) -> InboxSpec:
        """The folder and policy a spec names (a string is resolved through the source registry first)."""
        if isinstance(spec, str):
            from flywheel.sources import resolve

            spec = resolve(spec)[1]
        take = spec.int_param("take", 0) or None       # 0 or absent: everything the inbox offers
        return cls(Path(spec.body or "."), take, spec.int_param("retries", 0))


def is_inbox(spec: str) -> bool:
    return spec.startswith(PREFIX)


def arrivals(folder: Path) -> tuple[list[Problem], list[str]]:
    """Every problem in the inbox in arrival order, and what was skipped (bad rows, repeated ids)."""
    if not folder.is_dir():
        raise InputError(f"inbox {str(folder)!r} is not a folder",
                         hint="make the folder and drop .jsonl/.csv/.parquet problem files into it")
    files = sorted((f for f in folder.iterdir() if f.is_file() and f.suffix in SUFFIXES and not f.name.startswith(".")),
                   key=lambda f: (f.stat().st_mtime_ns, f.name))
    problems: list[Problem] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for f in files:
        rows, bad = load_file(f)
        skipped += bad
        for p in rows:
            if p.id in seen:
                skipped.append(f"{f.name}: id {p.id!r} arrived earlier in another file")
                continue
            seen.add(p.id)
            problems.append(p)
    return problems, skipped


@source("inbox", prefix=PREFIX, keys=("take", "retries"), example="inbox:./inbox?take=20",
        description="a folder of problem files arriving over time; each run takes what no run took (flywheel serve)")
def _load(spec: Spec) -> Loaded:
    return arrivals(InboxSpec.of(spec).folder)


@contextmanager
def _locked(folder: Path) -> Iterator[Path]:
    state = folder / STATE_DIR
    state.mkdir(exist_ok=True)
    with open(state / "lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield state / "claims.jsonl"
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _claims(ledger: Path) -> list[tuple[str, str]]:
    """(run id, problem id) of every claim, in the order made; a torn last line (a crash mid-write) is ignored."""
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            out.append((str(row["run"]), str(row["id"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def take(spec: Spec | str, run_id: str, outcome: Outcomes) -> ProblemSet:
    """The problems run `run_id` works on: its earlier claims (a resume), else the next ones it may take."""
    text = spec.text if isinstance(spec, Spec) else spec
    inbox = InboxSpec.of(spec)
    problems, skipped = arrivals(inbox.folder)
    by_id = {p.id: p for p in problems}
    with _locked(inbox.folder) as ledger:
        claims = _claims(ledger)
        mine = [pid for run, pid in claims if run == run_id]
        if mine:
            return ProblemSet(text, [by_id[p] for p in dict.fromkeys(mine) if p in by_id], skipped)
        outcomes: dict[str, RunOutcome | None] = {run: outcome(run) for run in {run for run, _ in claims}}
        tries: dict[str, int] = {}
        closed: set[str] = set()   # verified, or being worked on by a live run
        for run, pid in claims:
            rec = outcomes[run]
            if rec is None:
                continue
            if pid in rec.verified or (rec.running and pid not in rec.attempted):
                closed.add(pid)
            elif pid in rec.attempted:
                tries[pid] = tries.get(pid, 0) + 1
        chosen = [p for p in problems if p.id not in closed and tries.get(p.id, 0) <= inbox.retries]
        chosen = chosen[:inbox.take] if inbox.take is not None else chosen
        if chosen:
            at = datetime.now(UTC).isoformat(timespec="seconds")
            torn = ledger.exists() and ledger.stat().st_size > 0 and not ledger.read_bytes().endswith(b"\n")
            with open(ledger, "a", encoding="utf-8") as f:
                f.write("\n" if torn else "")   # a crash mid-line left half a claim: never glue ours to it
                f.write("".join(json.dumps({"run": run_id, "id": p.id, "at": at}) + "\n" for p in chosen))
                f.flush()
                os.fsync(f.fileno())
    return ProblemSet(text, chosen, skipped)
