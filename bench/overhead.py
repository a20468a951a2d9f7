"""Orchestration overhead of a recurring answer: Prefect + catalog + router time against model time.

On the real default model, N CHAMP problems get their curated solutions deposited, then:

1. `flow`: one `flywheel_run` pass (Prefect flow, tasks, catalog writes, router): every problem
   is an exact recurrence answered from its graft. Per problem, wall time between two calls of
   `flywheel_run`'s `progress` callback (the first interval also opens the run) against the attempt's
   model time (`AttemptResult.wall_seconds`: graft load from the store, prefill of the question,
   decode). Overhead = wall - model; the issue's target is under 5% of the wall time.
2. `direct`: the same steps in the same process without Prefect — the task functions' bodies
   (`task.fn`, or the plain functions route and record are) called one after another, each timed: router (`route`), model (`attempt`), verifier
   (`verify`), catalog (`record`). The flow's overhead minus router, verifier and catalog is what
   Prefect itself costs.

A throwaway flow run first starts Prefect's temporary server (its start-up is reported, not
counted), and one direct attempt warms the model, so neither pass pays a first-call cost.

    python bench/overhead.py                       # 4 problems, gemma3-270m
    python bench/overhead.py --problems 8 --json
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# Run as `python bench/x.py`, this directory is sys.path[0]: take it off so that no file here can
# shadow a package the flows import (bench/verifiers.py once shadowed `verifiers`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

if not os.environ.get("PREFECT_API_URL"):  # Prefect's temporary server, never the user's ~/.prefect
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="flywheel-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from flows import RunConfig, flywheel_run, runtime  # noqa: E402
from flows.demo import write_set  # noqa: E402
from flows.tasks import (  # noqa: E402
    Env,
    attempt_record,
    finish_run,
    graft_records,
    open_run,
    record,
    route_problem,
    verify,
)
from flywheel import config  # noqa: E402
from flywheel.attempt import run_attempt  # noqa: E402
from flywheel.decode import DecodeSchedule  # noqa: E402
from flywheel.problemsets import Problem, load_champ, load_problem_set  # noqa: E402

TARGET = 0.05  # the bar: overhead under 5% of a recurring answer's wall time
DEFAULT_PROBLEMS = 4


def flow_pass(cfg: RunConfig) -> tuple[dict[str, Any], list[float], float]:
    """Run the flow; (summary, per-problem wall seconds from the progress hook, total wall)."""
    marks: list[float] = []

    def mark(done: int, total: int | None, note: str) -> None:
        if done > len(marks):            # a problem finished (a heartbeat repeats `done`)
            marks.append(time.perf_counter())

    t0 = time.perf_counter()
    summary = flywheel_run(cfg, mark)
    total = time.perf_counter() - t0
    edges = [t0, *marks]
    return summary, [b - a for a, b in zip(edges, edges[1:], strict=False)], total


def direct_pass(env: Env, problems: list[Problem], spec: str, budget: int, run_id: str) -> tuple[list[dict[str, Any]], float]:
    """The flow's steps without Prefect, each timed; (per-problem step seconds, open+finish seconds)."""
    pset = load_problem_set(spec)
    clock = time.perf_counter
    t0 = clock()
    open_run.fn(env, pset, run_id=run_id, flow_run_id=None, budget=budget, attempts=1, no_graft=False, run_budget=None,
                schedule=DecodeSchedule(1, dtype=env.dtype).to_dict(),
                settings=RunConfig(problems=spec, model=env.model, library=env.library).settings())
    t_open = clock() - t0
    lib, engine = runtime.library(env.library, env.db_url), runtime.engine(env.model)
    rows = []
    for problem in problems:
        t0 = clock()
        decision = route_problem(env, problem, False, 1)
        t1 = clock()
        result = run_attempt(engine, lib, problem, route=decision.kind, artifact_sha=decision.artifact_sha, budget=budget)
        t2 = clock()
        verdict = verify(problem, result)
        t3 = clock()
        record(env, attempt_record(result, verdict, run_id=run_id, problem_id=problem.id, attempt_index=0,
                                  route=decision), graft_records(result))
        t4 = clock()
        if decision.artifact_sha:  # the graft load alone (store read, hash checks, graft), inside the model time
            lib.load_graft(engine, decision.artifact_sha)
        t5 = clock()
        rows.append({"route_s": t1 - t0, "attempt_s": t2 - t1, "model_s": result.wall_seconds, "verify_s": t3 - t2,
                     "record_s": t4 - t3, "graft_load_s": t5 - t4, "route": decision.kind, "verified": verdict.equivalent,
                     "decode_tokens": result.decode_tokens})
    t0 = clock()
    finish_run.fn(env, run_id)
    return rows, t_open + clock() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = config.model_name(args.model)
    problems = load_champ()[args.offset:args.offset + args.problems]
    with tempfile.TemporaryDirectory(prefix="overhead-bench-", dir=args.workdir) as tmp:
        root = Path(tmp)
        spec = str(write_set(problems, root / "set.jsonl"))
        library = str(root / "library")
        engine = runtime.engine(model)
        db_url = config.database_url(Path(library))
        lib = runtime.library(library, db_url)
        for p in problems:
            lib.deposit(engine, p, p.solution or "", p.reference or "", deposited_by="curator:bench")
        env = Env(model=model, library=library, db_url=db_url)
        t0 = time.perf_counter()
        flywheel_run(RunConfig(problems=spec, budget=0, limit=1, deposit=False, model=model, library=str(root / "warm-up")))
        t_server = time.perf_counter() - t0
        route_problem(env, problems[0], False)  # warm the router (catalog query) and the model
        warm = route_problem(env, problems[0], False)
        run_attempt(engine, lib, problems[0], route=warm.kind, artifact_sha=warm.artifact_sha, budget=args.budget)
        tag = f"bench-overhead-{time.strftime('%Y%m%dT%H%M%S')}"
        summary, walls, total = flow_pass(RunConfig(problems=spec, budget=args.budget, model=model, library=library,
                                                    run_id=f"{tag}-flow"))
        direct, t_open_finish = direct_pass(env, problems, spec, args.budget, f"{tag}-direct")
        runtime.close_libraries()
    results = {r["problem_id"]: r for r in summary["results"]}
    rows = []
    for p, wall, d in zip(problems, walls, direct, strict=True):
        r = results[p.id]
        over = wall - r["wall_seconds"]
        rows.append({"problem_id": p.id, "route": r["route"], "verified": r["verified"], "decode_tokens": r["decode_tokens"],
                     "restored_tokens": r["restored_tokens"], "flow_wall_s": wall, "model_s": r["wall_seconds"],
                     "overhead_s": over, "overhead_fraction": over / wall if wall else None,
                     **{f"direct_{k}": v for k, v in d.items()}})
    steady = rows[1:] or rows  # the first interval also opens the run
    model_s = summary["timing"]["model_seconds"]
    flow_over = total - model_s
    per_problem = {k: statistics.median(r[k] for r in rows) for k in
                   ("direct_route_s", "direct_verify_s", "direct_record_s", "direct_model_s", "direct_graft_load_s")}
    return {
        "model": engine.fingerprint.model, "device": engine.fingerprint.device_name, "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(), "problems": len(problems), "budget": args.budget, "target": TARGET,
        "prefect_server_start_s": t_server, "rows": rows,
        "flow": {"wall_s": total, "flow_wall_s": summary["timing"]["wall_seconds"], "model_s": model_s,
                 "overhead_s": flow_over, "overhead_fraction": flow_over / total,
                 "median_problem_overhead_fraction": statistics.median(r["overhead_fraction"] for r in steady),
                 "median_problem_overhead_s": statistics.median(r["overhead_s"] for r in steady),
                 "run_id": summary["run_id"]},
        "direct": {"median_s": per_problem, "open_finish_s": t_open_finish,
                   "median_problem_overhead_s": statistics.median(r["direct_route_s"] + r["direct_verify_s"] + r["direct_record_s"]
                                                                  for r in rows)},
        "prefect_per_problem_s": statistics.median(r["overhead_s"] - r["direct_route_s"] - r["direct_verify_s"] - r["direct_record_s"]
                                                   for r in steady),
        "meets_target": statistics.median(r["overhead_fraction"] for r in steady) < TARGET,
    }


def print_report(r: dict[str, Any]) -> None:
    print(f"{r['model']} on {r['device']}, {r['cpu_count']} cores (load average {r['load_average'][0]:.1f}); "
          f"{r['problems']} recurring CHAMP problems, budget {r['budget']}; Prefect server start-up "
          f"{r['prefect_server_start_s']:.1f} s (not counted)")
    print(f"{'problem':>18} {'route':>6} {'ok':>5} {'decode':>6} | {'flow wall':>9} {'model':>7} {'overhead':>8} {'%':>6} | "
          f"{'router':>7} {'verify':>7} {'catalog':>7} {'graft ld':>8} {'Prefect':>8}")
    for w in r["rows"]:
        prefect = w["overhead_s"] - w["direct_route_s"] - w["direct_verify_s"] - w["direct_record_s"]
        print(f"{w['problem_id']:>18} {w['route']:>6} {str(w['verified']):>5} {w['decode_tokens']:>6} | "
              f"{w['flow_wall_s'] * 1e3:>7.0f}ms {w['model_s'] * 1e3:>5.0f}ms {w['overhead_s'] * 1e3:>6.0f}ms "
              f"{100 * w['overhead_fraction']:>5.1f}% | {w['direct_route_s'] * 1e3:>5.1f}ms {w['direct_verify_s'] * 1e3:>5.1f}ms "
              f"{w['direct_record_s'] * 1e3:>5.1f}ms {w['direct_graft_load_s'] * 1e3:>6.1f}ms {prefect * 1e3:>6.0f}ms")
    f = r["flow"]
    print(f"flow total: wall {f['wall_s']:.2f} s, model {f['model_s']:.2f} s, overhead {f['overhead_s']:.2f} s "
          f"= {100 * f['overhead_fraction']:.1f}% of wall (incl. opening and summarizing the run)")
    print(f"per recurring answer (median, first problem excluded): overhead {f['median_problem_overhead_s'] * 1e3:.0f} ms "
          f"= {100 * f['median_problem_overhead_fraction']:.1f}% of its wall; of which router+verify+catalog "
          f"{r['direct']['median_problem_overhead_s'] * 1e3:.0f} ms and Prefect {r['prefect_per_problem_s'] * 1e3:.0f} ms; "
          f"target < {100 * r['target']:.0f}%: {'met' if r['meets_target'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", type=int, default=DEFAULT_PROBLEMS, help="CHAMP problems (from --offset)")
    p.add_argument("--offset", type=int, default=0, help="first CHAMP problem")
    p.add_argument("--budget", type=int, default=config.DEFAULT_BUDGET, help="decode-token budget per problem")
    p.add_argument("--model", default=None, help=f"model (default ${config.ENV_MODEL} or {config.DEFAULT_MODEL})")
    p.add_argument("--workdir", default=None, help="where the temporary library lives (default: system temp)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
