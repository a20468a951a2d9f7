"""Recurring problems: decode tokens, wall time and energy without vs with a graft, same budget, one run.

On the real default model, N CHAMP problems are run through the flywheel flow (`flywheel_run`)
twice at the same per-problem decode budget:

1. without grafts (`no_graft=True`, and no self-deposits, so pass 2 sees only the curated ones);
2. after depositing each problem's curated worked solution (`Library.deposit`), with grafts: the
   router finds the exact recurrence and the model answers on top of the restored state.

Each pass is metered by `flywheel.energy.EnergyMeter`, whose source is printed with every
figure (`estimate` = this process's CPU seconds x a configured wattage: a model, not a
measurement; `rapl`/`nvml` are counters). The ratios are printed next to the reference paper's
(8 problems: 401,026 budget tokens -> 61 decode tokens = 6,574x; about 8,700x less energy).
"budget tokens" = problems x budget, the reference's own baseline; decode tokens actually spent
without a graft are printed beside it. A throwaway flow run first starts Prefect's temporary
server, so neither pass pays its start-up.

    python bench/recurring.py                        # 4 problems, the default budget and model
    python bench/recurring.py --problems 8 --budget 160 --json
    python bench/recurring.py --paper-scale                      # the paper's scale (hours on a CPU)
    python bench/recurring.py --paper-scale --budget-total 4096 --attempt-budget 256   # reduced, reported so
    python bench/recurring.py --paper-scale --library runs/paper   # keep the library: `flywheel --library runs/paper report`
    python bench/recurring.py --paper-scale --model qwen2.5-coder-1.5b --scan-status   # where its scan stands (no model)
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
import time  # noqa: E402
from typing import Any  # noqa: E402

from flows import RunConfig, flywheel_run, runtime  # noqa: E402
from flows.demo import write_set  # noqa: E402
from flows.tasks import attempt_record  # noqa: E402
from flywheel import config, modelzoo  # noqa: E402
from flywheel.attempt import SAMPLE_TEMPERATURE, AttemptJob, PlannedAttempt, solve_many  # noqa: E402
from flywheel.catalog import AttemptRecord  # noqa: E402
from flywheel.domain import RouteDecision  # noqa: E402
from flywheel.energy import EnergyMeter, Reading  # noqa: E402
from flywheel.engine import Engine, EngineSettings  # noqa: E402
from flywheel.library import Library  # noqa: E402
from flywheel.problemsets import Problem, load_champ, set_hash  # noqa: E402

REFERENCE = {"problems": 8, "budget_tokens": 401_026, "decode_tokens": 61, "token_factor": 6_574,
             "energy_factor": 8_700}
DEFAULT_PROBLEMS = 4


def metered(meter: EnergyMeter, fn: Any) -> tuple[Any, Reading, float]:
    """Run `fn()` under the meter: (result, energy reading, wall seconds)."""
    t0 = time.perf_counter()
    meter.start()
    out = fn()
    reading = meter.stop()
    return out, reading, time.perf_counter() - t0


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = config.model_name(args.model)
    problems = load_champ()[args.offset:args.offset + args.problems]
    with tempfile.TemporaryDirectory(prefix="recurring-bench-", dir=args.workdir) as tmp:
        root = Path(tmp)
        spec = str(write_set(problems, root / "set.jsonl"))
        library = str(root / "library")
        engine = runtime.engine(model)
        meter = EnergyMeter(device=engine.settings.device)
        # Start Prefect's temporary server on a throwaway library (budget 0: no model call).
        flywheel_run(RunConfig(problems=spec, budget=0, limit=1, deposit=False, model=model,
                               library=str(root / "warm-up")))
        base = RunConfig(problems=spec, budget=args.budget, model=model, library=library)
        tag = f"bench-recurring-{time.strftime('%Y%m%dT%H%M%S')}"
        pass1, e1, w1 = metered(meter, lambda: flywheel_run(base.model_copy(
            update={"run_id": f"{tag}-nograft", "no_graft": True, "deposit": False})))
        lib = runtime.library(library, config.database_url(Path(library)))
        deposits, e_dep, w_dep = metered(meter, lambda: [
            lib.deposit(engine, p, p.solution or "", p.reference or "", deposited_by="curator:bench")
            for p in problems])
        pass2, e2, w2 = metered(meter, lambda: flywheel_run(base.model_copy(update={"run_id": f"{tag}-graft"})))
        runtime.close_libraries()
    by2 = {r["problem_id"]: r for r in pass2["results"]}
    rows = []
    for r1 in pass1["results"]:
        r2 = by2[r1["problem_id"]]
        rows.append({"problem_id": r1["problem_id"], "reference": next(p.reference for p in problems if p.id == r1["problem_id"]),
                     "nograft_decode": r1["decode_tokens"], "nograft_answer": r1["answer"], "nograft_verified": r1["verified"],
                     "graft_decode": r2["decode_tokens"], "graft_restored": r2["restored_tokens"],
                     "graft_prefill": r2["prefill_tokens"], "graft_route": r2["route"], "graft_answer": r2["answer"],
                     "graft_verified": r2["verified"], "nograft_s": r1["wall_seconds"], "graft_s": r2["wall_seconds"]})
    t1, t2 = pass1["totals"], pass2["totals"]
    budget_tokens = args.budget * len(problems)
    return {
        "model": engine.fingerprint.model, "fingerprint": engine.fingerprint.digest, "device": engine.fingerprint.device_name,
        "cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "problems": len(problems), "budget": args.budget,
        "problem_set_hash": pass1["problem_set_hash"], "energy_source": e1.source, "rows": rows,
        "nograft": {"decode_tokens": t1["decode_tokens"], "prefill_tokens": t1["prefill_tokens"], "verified": t1["verified"],
                    "wall_s": w1, "flow_wall_s": pass1["timing"]["wall_seconds"], "model_s": pass1["timing"]["model_seconds"],
                    "joules": e1.joules, "cpu_s": e1.cpu_seconds, "run_id": pass1["run_id"]},
        "graft": {"decode_tokens": t2["decode_tokens"], "prefill_tokens": t2["prefill_tokens"],
                  "restored_tokens": t2["restored_tokens"], "verified": t2["verified"], "wall_s": w2,
                  "flow_wall_s": pass2["timing"]["wall_seconds"], "model_s": pass2["timing"]["model_seconds"],
                  "joules": e2.joules, "cpu_s": e2.cpu_seconds, "run_id": pass2["run_id"]},
        "deposit": {"artifacts": [d.artifact_sha256 for d in deposits], "tokens": sum(d.token_count for d in deposits),
                    "wall_s": w_dep, "joules": e_dep.joules},
        "budget_tokens": budget_tokens,
        "ratios": {"budget_tokens_per_graft_decode": ratio(budget_tokens, t2["decode_tokens"]),
                   "decode_tokens": ratio(t1["decode_tokens"], t2["decode_tokens"]),
                   "wall": ratio(w1, w2), "model_s": ratio(pass1["timing"]["model_seconds"], pass2["timing"]["model_seconds"]),
                   "energy": ratio(e1.joules, e2.joules)},
        "reference": REFERENCE,
    }


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f}x"


def print_report(r: dict[str, Any]) -> None:
    print(f"{r['model']} on {r['device']}, {r['cpu_count']} cores (load average {r['load_average'][0]:.1f}); "
          f"{r['problems']} CHAMP problems, budget {r['budget']} decode tokens each; energy source: {r['energy_source']}")
    print(f"{'problem':>18} {'ref':>10} | {'no graft: decode':>16} {'answer':>10} {'ok':>5} | "
          f"{'graft: route':>12} {'restored':>8} {'decode':>6} {'answer':>10} {'ok':>5}")
    for w in r["rows"]:
        print(f"{w['problem_id']:>18} {str(w['reference'])[:10]:>10} | {w['nograft_decode']:>16} {str(w['nograft_answer'])[:10]:>10} "
              f"{str(w['nograft_verified']):>5} | {w['graft_route']:>12} {w['graft_restored']:>8} {w['graft_decode']:>6} "
              f"{str(w['graft_answer'])[:10]:>10} {str(w['graft_verified']):>5}")
    a, b, q, ref = r["nograft"], r["graft"], r["ratios"], r["reference"]
    print(f"{'':>24} {'no graft':>12} {'graft':>12} {'ratio':>10} {'reference':>10}")
    print(f"{'budget tokens / decode':>24} {r['budget_tokens']:>12,} {b['decode_tokens']:>12,} "
          f"{_x(q['budget_tokens_per_graft_decode']):>10} {ref['token_factor']:>9,}x")
    print(f"{'decode tokens':>24} {a['decode_tokens']:>12,} {b['decode_tokens']:>12,} {_x(q['decode_tokens']):>10}")
    print(f"{'wall s (pass)':>24} {a['wall_s']:>12.1f} {b['wall_s']:>12.1f} {_x(q['wall']):>10}")
    print(f"{'model s':>24} {a['model_s']:>12.1f} {b['model_s']:>12.1f} {_x(q['model_s']):>10}")
    print(f"{'energy J (' + r['energy_source'] + ')':>24} {a['joules']:>12.1f} {b['joules']:>12.1f} "
          f"{_x(q['energy']):>10} {ref['energy_factor']:>9,}x")
    print(f"{'verified':>24} {a['verified']:>12} {b['verified']:>12}")
    d = r["deposit"]
    print(f"one-time deposit of {len(d['artifacts'])} curated solutions: {d['tokens']:,} prefill tokens, "
          f"{d['wall_s']:.1f} s, {d['joules']:.1f} J ({r['energy_source']})")


# --- the paper's recurring experiment, at its scale -----------------------------------------------

PAPER_TOTAL = 400_000        # the paper's ungrafted budget (401,026 tokens over 8 problems), at least
PAPER_PROBLEMS = 8
ATTEMPT_BUDGET = 1_024       # per sampled attempt: a worked CHAMP solution fits, and so does the window
RECURRENCE_BUDGET = 64       # decode budget of the grafted answer (as in bench/recurrences.py)


def selection_rule(total: int, attempt_budget: int, problems: int = PAPER_PROBLEMS) -> dict[str, Any]:
    """The selection rule, fixed before any model call (printed and recorded with the result).

    CHAMP problems are taken in the package's order; each gets K = ceil(total / problems /
    attempt_budget) ungrafted attempts of `attempt_budget` decode tokens (attempt k sampled at the
    flywheel's temperature with seed k; greedy when K = 1). A problem none of whose K attempts is
    verified is selected; the scan stops at `problems` selected ones. Their ungrafted budget is
    problems x K x attempt_budget >= total. A problem's remaining attempts are skipped once one
    verifies: that cannot change whether it is selected.
    """
    k = max(1, -(-total // (problems * attempt_budget)))
    return {"order": "CHAMP package order", "problems": problems, "attempts_per_problem": k,
            "attempt_budget": attempt_budget, "temperature": SAMPLE_TEMPERATURE if k > 1 else 0.0,
            "seeds": f"0..{k - 1}", "selected_if": "no attempt verified",
            "early_stop": "a problem's remaining attempts are not decoded once one verifies (it is not selected)",
            "budget_tokens_per_problem": k * attempt_budget, "budget_tokens_total": problems * k * attempt_budget}


class ScanLog:
    """The scan's outcomes, one JSON line per judged problem, appended (and fsynced) as each is judged.

    The first line is the header: the selection rule, the model's fingerprint and the CHAMP set's
    hash. Opening an existing log under another header is refused, naming the key, so an
    interrupted run resumes only under the same rule on the same model; the problems it already
    judged are not decoded again.

    Between a problem's start and its verdict, each finished attempt is appended too, as a `partial`
    line (its catalog record, and the wall seconds and joules since the line before): an unsolved
    problem of the 1.5B takes most of an hour, and a run stopped in its middle resumes with the
    attempts it had decoded (`partial`, by problem id) instead of starting that problem over.
    Each attempt's seed is its index, and the batched decoder is slot-invariant, so an attempt
    decoded after a resume has the bits it would have had without one.
    """

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.partial: dict[str, list[dict[str, Any]]] = {}
        if path.is_file() and path.stat().st_size > 0:
            text = path.read_text()
            if not text.endswith("\n"):   # torn by a kill mid-write: that problem is judged again
                text = text[:text.rfind("\n") + 1]
                path.write_text(text)
            found, self.rows, self.partial = self.parse(text)
            for key in header:
                if found.get(key) != header[key]:
                    raise SystemExit(f"{path}: recorded under another {key!r} than this run's; "
                                     "pass another --state, or delete the file to start over")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append(header)

    @staticmethod
    def parse(text: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        """A log's header, verdict rows and partial lines by problem id; a torn last line is left out."""
        lines = [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
        rows: list[dict[str, Any]] = []
        partial: dict[str, list[dict[str, Any]]] = {}
        for row in lines[1:]:
            if "partial" in row:
                partial.setdefault(row["partial"], []).append(row)
            else:
                rows.append(row)
        return (lines[0] if lines else {}), rows, partial

    def _append(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def add(self, row: dict[str, Any]) -> None:
        self._append(row)
        self.rows.append(row)

    def add_partial(self, problem_id: str, record: dict[str, Any], wall_s: float, joules: float) -> None:
        row = {"partial": problem_id, "attempt": record, "wall_s": wall_s, "joules": joules}
        self._append(row)
        self.partial.setdefault(problem_id, []).append(row)

    @property
    def judged(self) -> set[str]:
        return {r["problem_id"] for r in self.rows}


def default_state(model: str, total: int, attempt_budget: int) -> Path:
    """Where a scan's log lives unless `--state` says: beside the results, one per model and scale."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in model)
    return Path(__file__).resolve().parent / "results" / f"paper-scale-{safe}-{total}-{attempt_budget}.scan.jsonl"


NO_ROUTE = RouteDecision("none", None, 0.0, None)


def _loggable(record: AttemptRecord) -> dict[str, Any]:
    """An attempt's catalog record as a scan-log field (the run id is given when it is recorded)."""
    out = dict(vars(record))
    del out["run_id"]
    return out


def record_passes(lib: Library, engine: Engine, rule: dict[str, Any], champ: list[Problem], scanned: list[dict[str, Any]],
                  graft_run: str, grafted: list[AttemptRecord], scan_run: str) -> dict[str, Any]:
    """Record the scan and the grafted pass in `lib`'s catalog as two runs, so `flywheel report` shows them.

    The scan's run (`scan_run`, ungrafted) holds every attempt the log kept; a problem judged by an
    older version of this bench, whose log row has no attempts, is named in `not_recorded` (the
    report then has no baseline for it and counts it, never compares it). Recording is idempotent:
    an attempt already in the catalog is not written twice.
    """
    shown = [r for r in scanned if "attempts" in r]
    by_id = {p.id: p for p in champ}
    lib.catalog_problems([by_id[r["problem_id"]] for r in shown] + [by_id[a.problem_id] for a in grafted])
    common = {"problem_set": "champ", "problem_set_hash": set_hash(champ), "model_name": engine.fingerprint.model,
              "model_fingerprint": engine.fingerprint.digest}
    lib.catalog.create_run(run_id=scan_run, budget=rule["attempt_budget"], attempts=rule["attempts_per_problem"],
                           no_graft=True, **common)
    for row in shown:
        for a in row["attempts"]:
            lib.catalog.record_attempt(AttemptRecord(run_id=scan_run, **a))
    lib.catalog.finish_run(scan_run)
    lib.catalog.create_run(run_id=graft_run, budget=RECURRENCE_BUDGET, attempts=1, **common)
    for a in grafted:
        lib.catalog.record_attempt(a)
    lib.catalog.finish_run(graft_run)
    return {"scan_run": scan_run, "graft_run": graft_run,
            "not_recorded": [r["problem_id"] for r in scanned if "attempts" not in r]}


def scan(engine: Engine, rule: dict[str, Any], champ: list[Problem], log: ScanLog, meter: EnergyMeter,
         slots: int) -> None:
    """Judge CHAMP problems in package order until `rule["problems"]` are unsolved, each written to `log` as judged.

    A problem's remaining attempts are not decoded once one of them verifies (it cannot be selected
    any more); a problem none of whose K attempts verifies is selected. Each row keeps every decoded
    attempt's catalog record (`attempts`, without a run id), so the scan can be recorded as a run.
    """
    k, budget, temp = rule["attempts_per_problem"], rule["attempt_budget"], rule["temperature"]
    for p in champ:
        unsolved = sum(not r["solved"] for r in log.rows)
        if unsolved >= rule["problems"]:
            return
        if p.id in log.judged:
            continue
        earlier = list(log.partial.get(p.id, []))     # a copy: this segment appends to the log's list
        records = [row["attempt"] for row in earlier]
        wall, joules = sum(row["wall_s"] for row in earlier), sum(row["joules"] for row in earlier)
        solved = any(r["verified"] for r in records)      # stopped between its verified attempt and the verdict line
        done = {r["attempt_index"] for r in records}
        todo = [PlannedAttempt(i, budget, i) for i in range(k) if i not in done]
        if records:
            print(f"  {p.id}: resuming with {len(records)} of {k} attempts already decoded", flush=True)
        if not solved and todo:
            job = AttemptJob(p, "none", None, todo, temp)
            t0 = time.perf_counter()
            meter.start()
            attempts = solve_many(engine, None, [job], slots=min(slots, len(todo)))
            for _, index, r in attempts:
                answered = p.check_output(r.text, r.mode, markers=r.markers)
                record = _loggable(attempt_record(r, answered, run_id="", problem_id=p.id, attempt_index=index,
                                                  route=NO_ROUTE))
                reading, now = meter.stop(), time.perf_counter()
                meter.start()
                log.add_partial(p.id, record, now - t0, reading.joules)
                records.append(record)
                wall, joules, t0 = wall + now - t0, joules + reading.joules, now
                # One line per attempt: an unsolved problem takes ~25 minutes on the 1.5B, a piped run
                # should not sit silent through it.
                print(f"    {p.id}: attempt {index} {'verified' if answered.verdict.equivalent else 'not verified'} "
                      f"({record['decode_tokens']:,} tokens); {len(records)} of {k} decoded, "
                      f"{sum(r['decode_tokens'] for r in records):,} tokens, {wall:.0f} s; {unsolved} of "
                      f"{rule['problems']} unsolved so far", flush=True)
                if answered.verdict.equivalent:
                    solved = True
                    break           # early stop: the rest would not change the verdict
            attempts.close()
            meter.stop()
        decoded = sum(r["decode_tokens"] for r in records)
        shas = {r["logits_sha256"] for r in records if r["logits_sha256"]}
        log.add({"problem_id": p.id, "solved": solved, "attempts_decoded": len(records), "decode_tokens": decoded,
                 "budget_tokens": k * budget, "wall_s": wall, "joules": joules,
                 "energy_source": meter.source, "logits_sha256": sorted(shas),
                 "load_average": os.getloadavg()[0], "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "attempts": records,
                 "resumed_after": len(earlier), "slots": slots})
        print(f"  {p.id}: {'solved' if solved else 'not solved'} ({len(records)} of {k} attempts x {budget}; "
              f"{decoded:,} decoded, {wall:.0f} s)", flush=True)


def scan_status(args: argparse.Namespace) -> dict[str, Any]:
    """Where a paper-scale scan stands, read from its log alone: no model is loaded, nothing is written."""
    model = config.model_name(args.model)
    state = Path(args.state) if args.state else default_state(model, args.budget_total, args.attempt_budget)
    if not state.is_file():
        raise SystemExit(f"{state}: no scan log here yet (start the scan with the same --model and budgets)")
    header, rows, partial = ScanLog.parse(state.read_text())
    rule = header.get("rule", {})
    judged = [{k: r[k] for k in ("problem_id", "solved", "attempts_decoded", "decode_tokens", "wall_s", "at")}
              for r in rows]
    done = {r["problem_id"] for r in rows}
    going = {pid: {"attempts_decoded": len(lines), "decode_tokens": sum(x["attempt"]["decode_tokens"] for x in lines),
                   "wall_s": sum(x["wall_s"] for x in lines)}
             for pid, lines in partial.items() if pid not in done}
    return {"mode": "scan-status", "state": state.name, "model": header.get("model"), "rule": rule,
            "judged": judged, "unsolved": sum(not r["solved"] for r in rows), "wanted": rule.get("problems"),
            "in_progress": going, "decoded": sum(r["decode_tokens"] for r in rows)
            + sum(g["decode_tokens"] for g in going.values()),
            "wall_s": sum(r["wall_s"] for r in rows) + sum(g["wall_s"] for g in going.values())}


def print_status(r: dict[str, Any]) -> None:
    print(f"{r['state']}: {r['model']}, {len(r['judged'])} judged, {r['unsolved']} of {r['wanted']} unsolved found; "
          f"{r['decoded']:,} tokens decoded in {r['wall_s'] / 3600:.1f} h of scan")
    for j in r["judged"]:
        print(f"  {j['problem_id']}: {'solved' if j['solved'] else 'not solved'} ({j['attempts_decoded']} attempts, "
              f"{j['decode_tokens']:,} tokens, {j['wall_s']:.0f} s; judged {j['at']})")
    for pid, g in r["in_progress"].items():
        print(f"  {pid}: in progress, {g['attempts_decoded']} of {r['rule']['attempts_per_problem']} attempts "
              f"decoded ({g['decode_tokens']:,} tokens, {g['wall_s']:.0f} s): a resume keeps them")


def paper_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Select the unsolved problems by `selection_rule`, deposit their curated solutions, answer each from its graft.

    The scan is resumable: its outcomes go to `--state` as each attempt finishes and each problem is
    judged, and a rerun with the same rule and model continues after the last decoded attempt.
    """
    model = config.model_name(args.model)
    rule = selection_rule(args.budget_total, args.attempt_budget)
    print(f"selection rule (fixed before running): {json.dumps(rule)}", flush=True)
    champ = load_champ()
    engine = Engine.load(model, EngineSettings(device=args.device))
    meter = EnergyMeter(device=engine.settings.device)
    state = Path(args.state) if args.state else default_state(model, args.budget_total, args.attempt_budget)
    log = ScanLog(state, {"rule": rule, "model": model, "fingerprint": engine.fingerprint.digest,
                          "champ_set_hash": set_hash(champ)})
    if log.rows:
        print(f"resuming from {state}: {len(log.rows)} problems already judged", flush=True)
    scan(engine, rule, champ, log, meter, args.slots)
    by_id = {p.id: p for p in champ}
    selected = [by_id[r["problem_id"]] for r in log.rows if not r["solved"]][:PAPER_PROBLEMS]
    k, budget = rule["attempts_per_problem"], rule["attempt_budget"]
    with tempfile.TemporaryDirectory(prefix="recurring-paper-", dir=args.workdir) as tmp, \
            Library.open(Path(args.library) if args.library else Path(tmp)) as lib:
        deposits = [lib.deposit(engine, p, p.solution or "", p.reference or "", deposited_by="curator:bench")
                    for p in selected]
        routes = {p.id: lib.route(engine, p.text) for p in selected}
        jobs = [AttemptJob(p, routes[p.id].kind, routes[p.id].artifact_sha, [PlannedAttempt(0, RECURRENCE_BUDGET, None)])
                for p in selected]
        t1 = time.perf_counter()
        meter.start()
        grafted = [(j.problem, r) for j, _, r in solve_many(engine, lib, jobs, slots=args.slots)]
        with_graft = meter.stop()
        graft_wall = time.perf_counter() - t1
        checked = [(p, r, p.check_output(r.text, r.mode, markers=r.markers)) for p, r in grafted]
        runs = None
        if args.library:
            stem = state.name.removesuffix(".jsonl").removesuffix(".scan")
            graft_run = f"{stem}-graft-{time.strftime('%Y%m%dT%H%M%S')}"
            records = [attempt_record(r, a, run_id=graft_run, problem_id=p.id, attempt_index=0, route=routes[p.id])
                       for p, r, a in checked]
            runs = record_passes(lib, engine, rule, champ, log.rows, graft_run, records,
                                 scan_run=f"{stem}-scan")
            runs["library"] = Path(args.library).name   # its folder's name: no machine path in a result
    rows: list[dict[str, Any]] = [{"problem_id": p.id, "route": routes[p.id].kind, "answer": a.answer,
             "verified": a.verdict.equivalent, "decode_tokens": r.decode_tokens,
             "restored_tokens": r.restored_tokens, "prefill_tokens": r.prefill_tokens,
             "artifact_sha256": r.grafted_artifact_sha, "logits_sha256": r.logits_sha256} for p, r, a in checked]
    scanned = log.rows
    chosen = [r for r in scanned if r["problem_id"] in {p.id for p in selected}]
    budget_tokens = len(selected) * k * budget
    graft_decode = sum(r["decode_tokens"] for r in rows)
    graft_computed = graft_decode + sum(r["prefill_tokens"] for r in rows)
    decoded_without = sum(r["decode_tokens"] for r in chosen)
    return {"mode": "paper-scale", "model": model, "fingerprint": engine.fingerprint.digest,
            "device": engine.fingerprint.device_name, "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
            "rule": rule, "paper_scale": args.budget_total >= PAPER_TOTAL, "state": state.name,   # no machine path
            "state_sha256": modelzoo.sha256_file(state), "champ_set_hash": set_hash(champ),
            "selected": [p.id for p in selected], "selected_set_hash": set_hash(selected), "scanned": scanned,
            "budget_tokens": budget_tokens, "decoded_without_graft": decoded_without,
            "decoded_in_scan": sum(r["decode_tokens"] for r in scanned),
            "graft_decode_tokens": graft_decode, "graft_computed_tokens": graft_computed,
            # The report's definitions (`flywheel.report.figures`): tokens decoded without / with.
            "decode_factor": ratio(decoded_without, graft_decode),
            "computed_factor": ratio(decoded_without, graft_computed),
            # The paper's row as it is usually quoted: the budget given without / decode tokens with.
            "budget_factor": ratio(budget_tokens, graft_decode), "catalog": runs,
            "verified_with_graft": sum(r["verified"] for r in rows),
            "energy_source": with_graft.source, "joules_without": sum(r["joules"] for r in chosen),
            "joules_scan": sum(r["joules"] for r in scanned), "joules_with": with_graft.joules,
            "wall_without_s": sum(r["wall_s"] for r in chosen), "wall_scan_s": sum(r["wall_s"] for r in scanned),
            "wall_with_s": graft_wall,
            "deposits": [d.artifact_sha256 for d in deposits], "rows": rows, "reference": REFERENCE}


def print_paper(r: dict[str, Any]) -> None:
    est = " (an estimate: no meter readable)" if r["energy_source"] == "estimate" else ""
    scale = "the paper's scale" if r["paper_scale"] else f"REDUCED scale (not the paper's {PAPER_TOTAL:,}+ tokens)"
    print(f"{r['model']}, {r['cpu_count']} cores, load average {r['load_average'][0]:.1f}; {scale}")
    print(f"selected {len(r['selected'])} unsolved of {len(r['scanned'])} scanned: {', '.join(r['selected'])} "
          f"(set hash {r['selected_set_hash'][:16]}; scan log {r['state']}, sha256 {r['state_sha256'][:16]})")
    print(f"the scan decoded {r['decoded_in_scan']:,} tokens in {r['wall_scan_s']:.0f} s "
          f"({r['joules_scan']:.0f} J [{r['energy_source']}]), solved problems included")
    for w in r["rows"]:
        print(f"  {w['problem_id']}: route {w['route']}, {w['decode_tokens']} decode tokens, answer {w['answer']!r}, "
              f"verified {w['verified']}, artifact {str(w['artifact_sha256'])[:12]}, logits {str(w['logits_sha256'])[:12]}")
    print(f"budget tokens without graft {r['budget_tokens']:,}, decoded {r['decoded_without_graft']:,}; "
          f"decode tokens with grafts {r['graft_decode_tokens']:,}: budget factor {_x(r['budget_factor'])} "
          f"(paper: {REFERENCE['budget_tokens']:,} -> {REFERENCE['decode_tokens']} = {REFERENCE['token_factor']:,}x); "
          f"decode factor (decoded without / with, the report's) {_x(r['decode_factor'])}; "
          f"computed factor (decoded without / prefill + decode with) {_x(r['computed_factor'])}")
    print(f"verified with grafts {r['verified_with_graft']}/{len(r['rows'])}; wall {r['wall_without_s']:.1f} s "
          f"without, {r['wall_with_s']:.1f} s with; energy {r['joules_without']:.1f} J without, "
          f"{r['joules_with']:.1f} J with [{r['energy_source']}]{est}")
    if r["catalog"]:
        c = r["catalog"]
        missing = f"; judged before attempts were logged, not recorded: {', '.join(c['not_recorded'])}" \
            if c["not_recorded"] else ""
        print(f"recorded as runs {c['scan_run']} (ungrafted scan) and {c['graft_run']} (grafted){missing}: "
              f"flywheel --model {r['model']} --library {c['library']} report")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", type=int, default=DEFAULT_PROBLEMS, help="CHAMP problems (from --offset)")
    p.add_argument("--offset", type=int, default=0, help="first CHAMP problem")
    p.add_argument("--budget", type=int, default=config.DEFAULT_BUDGET, help="decode-token budget per problem, both passes")
    p.add_argument("--model", default=None, help=f"model (default ${config.ENV_MODEL} or {config.DEFAULT_MODEL})")
    p.add_argument("--workdir", default=None, help="where the temporary library lives (default: system temp)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--paper-scale", action="store_true",
                   help=f"the paper's experiment: the first {PAPER_PROBLEMS} CHAMP problems unsolved within the "
                        "ungrafted budget (see selection_rule), each answered from its graft")
    p.add_argument("--budget-total", type=int, default=PAPER_TOTAL,
                   help=f"--paper-scale: total ungrafted budget over the {PAPER_PROBLEMS} problems "
                        f"(default {PAPER_TOTAL:,}; less is a reduced run, reported as such)")
    p.add_argument("--attempt-budget", type=int, default=ATTEMPT_BUDGET, help="--paper-scale: decode budget per attempt")
    p.add_argument("--slots", type=int, default=8, help="--paper-scale: decode slots")
    p.add_argument("--state", default=None,
                   help="--paper-scale: the scan's log (JSON lines, appended as each problem is judged; a rerun "
                        "resumes from it). Default bench/results/paper-scale-MODEL-TOTAL-ATTEMPT.scan.jsonl")
    p.add_argument("--library", default=None,
                   help="--paper-scale: keep the library here (default: a temporary one) and record the scan and "
                        "the grafted pass in its catalog as two runs, for `flywheel --library DIR report`")
    p.add_argument("--scan-status", action="store_true",
                   help="--paper-scale: print where the scan stands from its log (no model is loaded) and exit")
    p.add_argument("--out", default=None, help="also write the JSON result to this file")
    p.add_argument("--device", default="cpu", help="--paper-scale: cpu or cuda (the fingerprint records it; "
                                                    "a log written on one device is not resumed on another)")
    args = p.parse_args(argv)
    if args.scan_status and not args.paper_scale:
        p.error("--scan-status goes with --paper-scale")
    if args.scan_status:
        result, show = scan_status(args), print_status
    elif args.paper_scale:
        result, show = paper_scale(args), print_paper
    else:
        result, show = run(args), print_report
    if args.out and not args.scan_status:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        show(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
