"""Problem sets: a spec names a registered source (`flywheel.sources`), which yields the problems.

A set resolves to a list of `Problem`s plus a hash of their content, so every report can say
exactly which problems it scored.

Spec grammar (anything else is refused at once with what is allowed):

    champ | champ?n=N                        the first N of the 270 CHAMP problems
    PATH.jsonl | PATH.csv | PATH.parquet     a user file
    gen:FAMILIES?n=N&seed=S&split=SPLIT      generated; keys optional (n=50, seed=0, no split)
    gen:                                     refused with the list of families (name, size, description)
    gsm-symbolic:?templates=T&n=N&seed=S     GSM-Symbolic instances, N per template (n=1, seed=0)
    gsm-symbolic:?templates=T&original=1     each template's original GSM8K question
    gsm-symbolic:                            refused with what the source offers (splits, templates)

Each source documents its own part: `flywheel.sources.generated` (FAMILIES, splits, ids),
`flywheel.sources.gsm_symbolic` (T, the committed template split, ids, the cache),
`flywheel.sources.champ`, `flywheel.sources.files`. A new source registers itself with
`flywheel.sources.source` under its prefix, as the built-ins do.
"""

from __future__ import annotations

from collections.abc import Callable

from flywheel.errors import InputError
from flywheel.sources import describe_sources, resolve
from flywheel.sources.champ import champ_corpus, load_champ
from flywheel.sources.files import PROBLEM_FIELDS, load_file
from flywheel.sources.generated import DEFAULT_N, GEN_KEYS, describe_families, generate
from flywheel.sources.problem import Problem, ProblemSet, set_hash

__all__ = ["DEFAULT_N", "GEN_KEYS", "PROBLEM_FIELDS", "Problem", "ProblemSet", "champ_corpus", "describe_families",
           "describe_sources", "generate", "load_champ", "load_file", "load_problem_set", "over_window", "set_hash"]


def load_problem_set(spec: str, *, limit: int | None = None) -> ProblemSet:
    """Resolve a spec through the source that claims it: `champ`, a path, `gen:...`, `gsm-symbolic:...`.

    Args:
        spec: the set as a user types it (see the module docstring for the grammar).
        limit: keep only the first `limit` problems.
    Returns:
        the `ProblemSet`; bad file rows and templates that could not be instantiated are listed in
        `skipped`, never silently dropped.
    Raises:
        InputError: unknown source, family or template (the bare prefix lists them), missing or
            unreadable file, unknown query key, or an `n` that is not a positive integer within
            what the source can produce.

    Example: `load_problem_set("gen:linear?n=3&seed=1").problems[0].reference` -> `"9"`.
    """
    from flywheel.plugins import call_plugin
    from flywheel.sources import SOURCES

    src, parsed = resolve(spec)
    loaded = call_plugin(f"problem source {src.name!r} ({SOURCES.provider(src.name)})", src.load, parsed)
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[0], list)
            and all(isinstance(p, Problem) for p in loaded[0]) and isinstance(loaded[1], list)):
        raise InputError(f"problem source {src.name!r} ({SOURCES.provider(src.name)}) returned "
                         f"{type(loaded).__name__}, not (problems, skipped)",
                         hint="a plug-in's bug: fix or uninstall the package that provides it")
    problems, skipped = loaded
    if limit is not None:
        problems = problems[:limit]
    return ProblemSet(spec, problems, skipped)


def over_window(problems: list[Problem], count_tokens: Callable[[str], int], window: int,
                budget: int) -> list[str]:
    """Each problem whose plain prompt plus `budget` decode tokens exceeds a `window`-token model,
    named with its id and numbers (a run refuses such a set before it starts).

    Example: `over_window([Problem("p", "x " * 9000)], eng_count, 4096, 160)` ->
    `["problem 'p' is 18,003 prompt tokens; with the 160-token budget it exceeds ..."]`.
    """
    from flywheel.prompts import plain_prompt
    from flywheel.terminal import printable

    out = []
    for p in problems:
        n = count_tokens(plain_prompt(p.text))
        if n + budget > window:
            out.append(f"problem {printable(p.id, 60)!r} is {n:,} prompt tokens; with the {budget:,}-token "
                       f"budget it exceeds the model's {window:,}-token window")
    return out
