"""Exact recurrences: does the model answer a problem from its own graft, every time?

For each model, in a throwaway library: every problem's curated worked solution is deposited
(`Library.deposit`: verified, prefilled through the graft template, stored), then the problem is
asked again. The router must send it down the `exact` route to its own artifact; the model
answers on top of the restored state (the graft seeds the answer, nothing bypasses the model),
greedy, one attempt, under `--budget` decode tokens, and the verifier checks the answer against
the problem's reference (a wrong copy is refused like any wrong answer).

Printed per model: verified / recurrences with a Wilson 95% interval, median and maximum decode
tokens, and every miss (problem, answer given, raw continuation). Problems come from the built-in
families (`gen:all?n=1&seed=S&split=SPLIT`, one per family per seed) and CHAMP (the first
`--champ` problems in package order whose curated solution the library accepts).

    python bench/recurrences.py                                   # the check: held-out seeds 11-15 + 10 CHAMP
    python bench/recurrences.py --split train --seeds 1-3 --champ 0 --models smollm2-135m
    python bench/recurrences.py --split train --seeds 1-3 --champ 20 --champ-offset 40 --models qwen2.5-coder-0.5b --chat-recaps 2
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as `python bench/x.py`, this directory is sys.path[0]: take it off so that no file here can
# shadow a package the flywheel imports (bench/verifiers.py once shadowed `verifiers`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from flywheel.attempt import AttemptJob, PlannedAttempt, solve_many  # noqa: E402
from flywheel.engine import Engine  # noqa: E402
from flywheel.errors import DepositRefusedError  # noqa: E402
from flywheel.library import Library  # noqa: E402
from flywheel.problemsets import Problem, load_champ, load_problem_set  # noqa: E402
from flywheel.prompts import ChatFormat  # noqa: E402
from flywheel.stats import wilson  # noqa: E402

DEFAULT_MODELS = ("gemma3-270m", "smollm2-135m")


def seeds(spec: str) -> list[int]:
    """`11-15` or `1,4,7` -> the seeds (`none` or empty: no family problems, CHAMP alone)."""
    out: list[int] = []
    if spec.strip() in ("", "none"):
        return out
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def problems(args: argparse.Namespace) -> list[Problem]:
    """One problem per built-in family per seed, then the first `--champ` CHAMP problems (in package order)."""
    out: list[Problem] = []
    for s in seeds(args.seeds):
        out += load_problem_set(f"gen:all?n=1&seed={s}&split={args.split}").problems
    if args.problems:
        out += load_problem_set(args.problems).problems
    return out + load_champ()[args.champ_offset:args.champ_offset + args.champ_scan]


def run_model(model: str, candidates: list[Problem], args: argparse.Namespace) -> dict[str, Any]:
    """Deposit each candidate's curated solution, ask it again on the exact route, verify the answer."""
    engine = Engine.load(model)
    if args.chat_recaps is not None:   # a candidate recap count, for deciding CHAT_RECAPS on train problems
        if not isinstance(engine.prompt_format, ChatFormat):
            raise SystemExit(f"{model}: --chat-recaps needs a chat-format model, not {engine.prompt_format.tag}")
        engine.prompt_format = engine.prompt_format.with_recaps(args.chat_recaps)
    with tempfile.TemporaryDirectory(prefix="recurrences-bench-") as tmp, Library.open(Path(tmp)) as lib:
        jobs, skipped, champ = [], [], 0
        for p in candidates:
            if p.source == "champ" and champ >= args.champ:
                continue
            try:
                lib.deposit(engine, p, p.solution or "", p.reference or "", deposited_by="curator:bench")
            except DepositRefusedError as err:
                skipped.append({"problem_id": p.id, "reason": str(err)[:160]})
                continue
            route = lib.route(engine, p.text)
            if route.kind != "exact":   # the router must find the recurrence, or the bench measures nothing
                raise SystemExit(f"{model}: {p.id} routed {route.kind}, not exact")
            champ += p.source == "champ"
            jobs.append(AttemptJob(p, "exact", route.artifact_sha, [PlannedAttempt(0, args.budget, None)]))
        t0 = time.perf_counter()
        rows: list[dict[str, Any]] = []
        for job, _, result in solve_many(engine, lib, jobs, slots=args.slots):
            answered = job.problem.check_output(result.text, result.mode, markers=result.markers)
            rows.append({"problem_id": job.problem.id, "verified": answered.verdict.equivalent, "answer": answered.answer,
                         "reference": job.problem.reference, "decode_tokens": result.decode_tokens,
                         "mode": result.mode, "text": result.text, "grafted": result.grafted_artifact_sha is not None})
        wall = time.perf_counter() - t0
    if not all(r["grafted"] and r["mode"] == "answer" for r in rows):
        raise SystemExit(f"{model}: an attempt ran without its graft")
    k, n = sum(r["verified"] for r in rows), len(rows)
    lo, hi = wilson(k, n)
    tokens = [r["decode_tokens"] for r in rows]
    return {"model": model, "fingerprint": engine.fingerprint.digest, "template": engine.prompt_format.tag,
            "device": engine.fingerprint.device_name, "recurrences": n, "verified": k,
            "rate": k / n if n else 0.0, "ci95": [lo, hi], "median_decode_tokens": statistics.median(tokens) if tokens else None,
            "max_decode_tokens": max(tokens, default=None), "decode_tokens": sum(tokens),
            "champ": champ, "wall_seconds": wall, "skipped": skipped,
            "misses": [{k2: r[k2] for k2 in ("problem_id", "answer", "reference", "text")} for r in rows if not r["verified"]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model names")
    ap.add_argument("--split", default="heldout", choices=("train", "heldout"))
    ap.add_argument("--seeds", default="11-15", help="generator seeds, e.g. 11-15 or 1,2,3 (one problem per family each); none: CHAMP only")
    ap.add_argument("--champ", type=int, default=10, help="CHAMP recurrences (the first ones the library accepts)")
    ap.add_argument("--champ-scan", type=int, default=40, help="how many CHAMP problems to consider for --champ")
    ap.add_argument("--champ-offset", type=int, default=0, help="first CHAMP problem considered (package order)")
    ap.add_argument("--chat-recaps", type=int, default=None,
                    help="chat-format models: recap turns per graft (default: the format's own, CHAT_RECAPS)")
    ap.add_argument("--budget", type=int, default=64, help="decode budget per recurrence")
    ap.add_argument("--problems", default="", help="another problem set to add (e.g. 'gsm-symbolic:?templates=train&n=1&seed=1')")
    ap.add_argument("--slots", type=int, default=8, help="decode slots")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.champ <= 0:
        args.champ_scan = 0
    candidates = problems(args)
    out: dict[str, Any] = {"split": args.split, "seeds": args.seeds, "problems": args.problems,
                           "budget": args.budget, "load_average": list(os.getloadavg()), "models": []}
    for model in args.models.split(","):
        res = run_model(model.strip(), candidates, args)
        out["models"].append(res)
        if not args.json:
            lo, hi = res["ci95"]
            print(f"{res['model']} (template {res['template']}): {res['verified']}/{res['recurrences']} verified "
                  f"({res['rate']:.1%}, Wilson 95% {lo:.1%}-{hi:.1%}; {res['champ']} CHAMP), "
                  f"median {res['median_decode_tokens']} decode tokens (max {res['max_decode_tokens']}), "
                  f"{res['wall_seconds']:.1f} s", flush=True)
            for m in res["misses"]:
                print(f"  miss {m['problem_id']}: answered {m['answer']!r}, reference {m['reference']!r}, "
                      f"text {m['text'][:80]!r}")
            for s in res["skipped"]:
                print(f"  skipped {s['problem_id']}: {s['reason']}")
    out["load_average_end"] = list(os.getloadavg())
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"load average: start {out['load_average'][0]:.2f}, end {out['load_average_end'][0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
