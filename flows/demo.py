"""The flywheel end to end on the default model: it turns on its own verified solutions, and recurs for free.

1. seed: the starter library (`flows.starter`: one verified worked solution per built-in word
   family, a sibling, never one of the problems attempted), as `flywheel run` seeds an empty library;
2. pass 1: CHAMP problems (no knowledge yet) and fresh generated problems of the siblings' own
   templates (other names and numbers: the recurring kinds of problem a user brings), routed `near`
   to their family's sibling; K sampled attempts per problem share one prefill, decoded on batched slots;
   every verified attempt of a new problem is deposited as the model's own;
   then the fresh problems again without any graft (same K and seeds, nothing deposited): what the
   library's grafts did to problems it never held;
3. the CHAMP problems' curated worked solutions are deposited;
4. pass 2 over the same set: the CHAMP problems and every problem the model solved itself recur
   `exact` and are answered from their grafts in a few decode tokens.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flows.run import RunConfig, flywheel_run, new_run_id, run_env
from flows.starter import STARTER, starter_set
from flywheel import config
from flywheel.domain import Progress
from flywheel.errors import InputError
from flywheel.problemsets import Problem, load_champ, load_problem_set

CURATOR = "curator:demo"


def demo_problems(champ: int = config.DEMO_CHAMP, per_family: int = config.DEMO_PER_FAMILY, seed: int = 2) -> list[Problem]:
    """CHAMP's first `champ` problems and `per_family` fresh problems of every word family.

    The generated ones come from the train split (the siblings' templates; seed 2, so never a
    sibling): on held-out templates the default model verifies almost nothing unaided (BENCHMARKS.md,
    "Held-out levers"), on its siblings' templates it verifies a few at K = 4, which it deposits.
    """
    generated = load_problem_set(f"gen:all?n={per_family}&seed={seed}&split=train").problems if per_family else []
    return load_champ()[:champ] + generated


def family_seeds() -> list[Problem]:
    """One verified sibling per word family: the starter library's problems (train split, never attempted here)."""
    return load_problem_set(starter_set()).problems


def write_set(problems: list[Problem], path: Path) -> Path:
    """Write problems as a JSONL problem-set file (id, problem, reference, solution)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for p in problems:
            f.write(json.dumps({"id": p.id, "problem": p.text, "reference": p.reference,
                                "solution": p.solution}) + "\n")
    return path


def run_demo(workdir: Path, *, model: str | None = None, budget: int = config.DEMO_BUDGET,
             champ: int = config.DEMO_CHAMP, per_family: int = config.DEMO_PER_FAMILY,
             attempts: int = config.DEMO_ATTEMPTS,
             slots: int | None = None, dtype: str | None = None,
             calculator: bool | None = None, grounding: bool | None = None,
             progress: Progress | None = None) -> dict[str, Any]:
    """Seed -> pass 1 -> curated CHAMP deposits -> pass 2 (see the module docstring); returns both summaries.

    `progress` follows each pass's problems (`flywheel_run`)."""
    library = workdir / "library"
    problems = demo_problems(champ, per_family)
    spec = str(write_set(problems, workdir / "demo-set.jsonl"))
    cfg = RunConfig(problems=spec, budget=budget, attempts=attempts, model=config.model_name(model),
                    library=str(library), **({"slots": slots} if slots else {}),
                    **({"dtype": dtype} if dtype else {}),
                    **({"calculator": calculator} if calculator is not None else {}),
                    **({"grounding": grounding} if grounding is not None else {}))
    eng = run_env(cfg).engine()
    lib = run_env(cfg).open_library()
    tag = new_run_id()
    pass1 = flywheel_run(cfg.model_copy(update={"run_id": f"{tag}-pass1", "starter": per_family > 0}), progress)
    by_pass1 = {pass1["flow_run_id"], pass1["run_id"]}
    own = [a for a in lib.catalog.list_artifacts()
           if (s := lib.catalog.get_solution(a.solution_id)) is not None and s.deposited_by in by_pass1]
    curated = [p for p in problems if p.source == "champ"]
    fresh = [p for p in problems if p.source != "champ"]
    bare = None
    if fresh and per_family:   # the same fresh problems, attempts and seeds, without any graft: the graft's effect
        bare_spec = str(write_set(fresh, workdir / "demo-fresh.jsonl"))
        bare = flywheel_run(cfg.model_copy(update={"problems": bare_spec, "run_id": f"{tag}-nograft",
                                                   "no_graft": True, "deposit": False}), progress)
    deposited = [lib.deposit(eng, p, p.solution or "", p.reference or "", deposited_by=CURATOR) for p in curated]
    pass2 = flywheel_run(cfg.model_copy(update={"run_id": f"{tag}-pass2"}), progress)
    return {"library": str(library), "problem_set": spec, "pass1": pass1, "pass2": pass2, "nograft": bare,
            "siblings": pass1.get("starter", {}).get("deposited", []),
            "self_deposits": [a.sha256 for a in own], "self_deposited_ids": sorted({a.problem_id for a in own}),
            "curated": [d.artifact_sha256 for d in deposited], "curated_ids": [p.id for p in curated]}


def describe(demo: dict[str, Any]) -> list[str]:
    """A few readable lines: what each pass cost and solved, self-deposits, and pass 2's headline figures.

    The savings are the report's named figures for pass 2 (`flywheel.report.figures`), carried in its
    summary: the same decode and computed factors `flywheel report --run` prints for that pass.
    """
    p1, p2 = demo["pass1"], demo["pass2"]

    def line(name: str, s: dict[str, Any]) -> str:
        t = s["totals"]
        timing = s["timing"]
        return (f"{name}: {t['verified']}/{t['problems']} verified, {t['decode_tokens']:,} decode + "
                f"{t['prefill_tokens']:,} prefill tokens ({t['restored_tokens']:,} restored from grafts), "
                f"{timing['wall_seconds']:.0f} s on {timing['schedule']['slots']} decode slots")

    def recurring(ids: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return ([r for r in p1["results"] if r["problem_id"] in ids], [r for r in p2["results"] if r["problem_id"] in ids])

    rec1, rec2 = recurring(set(demo["curated_ids"]))
    own1, own2 = recurring(set(demo["self_deposited_ids"]))
    lines = [
        f"seeded the empty library with the starter library: {len(demo['siblings'])} verified sibling solutions "
        f"(one per word-problem family, marked {STARTER})",
        line("pass 1 (siblings only)", p1),
        f"deposited by the model itself in pass 1: {len(demo['self_deposits'])} verified "
        f"solution{'' if len(demo['self_deposits']) == 1 else 's'} "
        f"({', '.join(demo['self_deposited_ids']) or 'none'})",
        f"deposited {len(demo['curated'])} curated CHAMP solutions after pass 1",
        line("pass 2 (from grafts)  ", p2),
        f"recurring CHAMP problems: {sum(r['verified'] for r in rec1)}/{len(rec1)} -> "
        f"{sum(r['verified'] for r in rec2)}/{len(rec2)} verified; "
        f"{sum(r['route'] == 'exact' for r in rec2)} answered from exact grafts; decode tokens "
        f"{sum(r['decode_tokens'] for r in rec1):,} -> {sum(r['decode_tokens'] for r in rec2):,}",
    ]
    if demo.get("nograft"):
        bare = demo["nograft"]["results"]
        with_ = [r for r in p1["results"] if r["problem_id"] in {b["problem_id"] for b in bare}]
        lines.append(f"fresh problems of the siblings' templates (never in the library): {sum(r['verified'] for r in with_)}"
                     f"/{len(with_)} verified with the library's grafts (pass 1) vs {sum(r['verified'] for r in bare)}/"
                     f"{len(bare)} without any graft (same attempts and seeds); decode tokens "
                     f"{sum(r['decode_tokens'] for r in with_):,} vs {sum(r['decode_tokens'] for r in bare):,}")
    if own1:
        lines.append(f"problems the model solved itself: decode tokens with a sibling's near graft (pass 1) "
                     f"{sum(r['decode_tokens'] for r in own1):,} -> with their own exact graft (pass 2) "
                     f"{sum(r['decode_tokens'] for r in own2):,}; {sum(r['route'] == 'exact' for r in own2)}/"
                     f"{len(own2)} answered from the model's own grafts")
    lines += ["savings in pass 2, as `flywheel report --run` defines them:", *p2["savings"]["lines"]]
    lines.append(f"library: {demo['library']}  runs: {p1['run_id']}, {p2['run_id']}")
    return lines


# --- the stream: slices of new problems arrive, one run takes each -----------------------------------

def stream_slices(stream: Path) -> list[Path]:
    """The slice files of a stream folder in arrival order (by name).

    Raises:
        InputError: not a folder, or no `.jsonl` file in it.
    """
    if not stream.is_dir():
        raise InputError(f"stream {str(stream)!r} is not a folder",
                         hint="a folder of .jsonl slices (id, problem, reference), e.g. library/stream")
    slices = sorted(p for p in stream.glob("*.jsonl") if not p.name.startswith("."))
    if not slices:
        raise InputError(f"stream {str(stream)!r} holds no .jsonl slice", hint="e.g. library/stream/slice-1.jsonl")
    return slices


def run_stream_demo(workdir: Path, stream: Path, *, model: str | None = None,
                    budget: int = config.DEMO_STREAM_BUDGET, attempts: int = config.DEMO_STREAM_ATTEMPTS,
                    slots: int | None = None, progress: Progress | None = None,
                    stages: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The flywheel as a scheduled user runs it: each slice of `stream` arrives in an inbox and one run takes it.

    Every run asks each problem greedily first and samples again only where that failed (attempts until
    verified), deposits what it verified, and grafts what the library holds; the library starts empty
    (no starter). Then the control: the last slice again with no graft and no deposit, same attempts and
    seeds, what it would have cost without the library. Returns the runs' summaries in order.
    """
    say = stages or (lambda line: None)
    slices = stream_slices(stream)
    box, library = workdir / "inbox", workdir / "library"
    box.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(problems=f"inbox:{box}", budget=budget, attempts=attempts, until_verified=True, starter=False,
                    model=config.model_name(model), library=str(library), **({"slots": slots} if slots else {}))
    tag = new_run_id()
    runs = []
    for i, path in enumerate(slices, 1):
        shutil.copyfile(path, box / f".{path.name}.part")
        os.replace(box / f".{path.name}.part", box / path.name)   # arrives whole
        say(f"slice {i} ({path.name}) arrived in the inbox; run {i} takes it")
        runs.append(flywheel_run(cfg.model_copy(update={"run_id": f"{tag}-slice{i}"}), progress))
    say(f"control: slice {len(slices)} again without the library (no graft, no deposit, same attempts and seeds)")
    control = flywheel_run(cfg.model_copy(update={"problems": str(slices[-1]), "run_id": f"{tag}-control",
                                                  "no_graft": True, "deposit": False}), progress)
    texts = [{p.id: p.text for p in load_problem_set(str(path)).problems} for path in slices]
    return {"library": str(library), "model": cfg.model, "slices": [str(p) for p in slices], "runs": runs,
            "control": control, "texts": texts}


def describe_stream(demo: dict[str, Any]) -> list[str]:
    """Plain words: what each slice cost and verified, what the library held, what the recurring problems cost."""
    runs, control, texts = demo["runs"], demo["control"], demo["texts"]
    lines = [f"model {demo['model']}, library {demo['library']} (empty at the start)"]
    seen: dict[str, dict[str, Any]] = {}   # problem text -> its result the first time it was asked
    held = 0
    for i, (run, ids) in enumerate(zip(runs, texts, strict=True), 1):
        results = {r["problem_id"]: r for r in run["results"]}
        again = [pid for pid in results if ids.get(pid) in seen]
        new = [pid for pid in results if pid not in again]
        first = sum(r["verified"] and r["attempts"] == 1 for r in results.values())
        t = run["totals"]
        lines.append(f"slice {i}: {len(new)} new problem{'s' if len(new) != 1 else ''}"
                     + (f" and {len(again)} asked before" if again else "")
                     + f": {t['verified']}/{t['problems']} verified ({first} by the first, greedy attempt), "
                     f"{t['decode_tokens']:,} decode tokens; routes exact {_routes(results, 'exact')}, "
                     f"near {_routes(results, 'near')}, none {_routes(results, 'none')}")
        retried = sum(r["attempts"] - 1 for r in results.values())
        lines.append(f"  attempts until verified: {retried} sampled retr{'y' if retried == 1 else 'ies'} decoded where "
                     f"the greedy attempt failed; {first} problem{'s' if first != 1 else ''} verified at once "
                     "decoded nothing more")
        if again:
            cost_then = sum(seen[ids[pid]]["decode_tokens"] for pid in again)
            cost_now = sum(results[pid]["decode_tokens"] for pid in again)
            exact = sum(results[pid]["route"] == "exact" for pid in again)
            lines.append(f"  the {len(again)} recurring problem{'s' if len(again) != 1 else ''}: {exact} answered from "
                         f"{'their' if len(again) != 1 else 'its'} own verified graft, {cost_now:,} decode tokens "
                         f"(the first time: {cost_then:,})")
        for pid, r in results.items():
            seen.setdefault(ids[pid], r)
        held += sum(r["verified"] for pid, r in results.items() if pid in new)
        lines.append(f"  the library now holds {held} verified solution{'s' if held != 1 else ''} of the model's own")
    c = control["totals"]
    last = runs[-1]["totals"]
    lines.append(f"control (slice {len(runs)} again, no library): {c['verified']}/{c['problems']} verified, "
                 f"{c['decode_tokens']:,} decode tokens; with the library: {last['verified']}/{last['problems']}, "
                 f"{last['decode_tokens']:,}")
    return lines


def _routes(results: dict[str, dict[str, Any]], kind: str) -> int:
    return sum(r["route"] == kind for r in results.values())
