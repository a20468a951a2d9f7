"""The stream study (issue 55): slices of new problems arrive in an inbox, one scheduled run takes each.

Two arms see the same slices in the same order, each through its own inbox and library:

- `flywheel`: deposits on, grafts on, the library carried from slice to slice (cold at the start, no
  starter): what a user's scheduled `flywheel serve` over an inbox does;
- `baseline`: the same attempt policy with no library (`--no-graft --no-deposit`).

Each (slice, arm) is one `flywheel run --problems inbox:DIR --run-id stream-<arm>-s<i>` in a child
process, the slice dropped into the arm's inbox first. The command is resumable: a run the catalog shows
finished with an attempt for every problem of its slice is not run again, and a cut run is run again
under its own id, which takes exactly the problems it claimed and skips the attempts it recorded.
Everything reported is read back from the two catalogs, never from the runs' output.

    .venv/bin/python bench/stream.py --model qwen2.5-coder-0.5b --work /tmp/stream05 \\
        --slice 'gsm-symbolic:?templates=all&n=1&seed=301' --slice 'gsm-symbolic:?templates=all&n=1&seed=302' \\
        --slice 'gsm-symbolic:?templates=all&n=1&seed=303' --attempts 2 --until-verified \\
        --out bench/results/issue55-stream-qwen2.5-coder-0.5b.json

The result (`"mode": "stream"`): per slice and arm `n`, `first_verified` (attempt 0, greedy),
`verified` (any attempt), `decode_tokens`, routes of attempt 0; per slice the exact McNemar of the
arms' first attempts; `later`: slices 2..n pooled (paired by problem id), exact McNemar with its power,
the sign test over GSM-Symbolic templates, and decode tokens per verified answer per arm; `library_verify`:
what `flywheel library verify` said of the flywheel arm's library at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("flywheel", "baseline")
#: What each arm adds to `flywheel run` (both: no starter library, so the flywheel arm starts cold).
ARM_FLAGS = {"flywheel": ["--no-starter"], "baseline": ["--no-starter", "--no-graft", "--no-deposit"]}
_TEMPLATE = re.compile(r"^gsm-symbolic-t(\d+)-")


def log(line: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {line}", file=sys.stderr, flush=True)


def flywheel_cli() -> list[str]:
    exe = Path(sys.executable).with_name("flywheel")
    if not exe.exists():
        raise SystemExit(f"no `flywheel` beside {sys.executable}: run this with the project's .venv/bin/python")
    return [str(exe)]


def drop_slice(inbox: Path, index: int, spec: str, limit: int | None) -> tuple[list[str], str]:
    """Write slice `index` into `inbox` (once; a file already there is checked, not rewritten): the problem
    ids in order and the set's hash. Only id, problem and reference go in: a stream carries no worked
    solutions, so everything the flywheel arm deposits is the model's own."""
    from flywheel.problemsets import load_problem_set

    pset = load_problem_set(spec)
    problems = pset.problems[:limit] if limit else pset.problems
    rows = [json.dumps({"id": p.id, "problem": p.text, "reference": p.reference}, sort_keys=True) for p in problems]
    body = "\n".join(rows) + "\n"
    path = inbox / f"slice-{index:02d}.jsonl"
    inbox.mkdir(parents=True, exist_ok=True)
    if path.exists():
        if path.read_text() != body:
            raise SystemExit(f"{path} holds another slice than {spec!r}: use a fresh --work folder")
    else:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(body)
        os.replace(tmp, path)   # whole or absent: a reader never sees half a slice
    return [p.id for p in problems], pset.hash


def library(root: Path) -> Any:
    from flows import runtime
    from flywheel import config

    return runtime.library(str(root), config.database_url(root, None))


def run_done(root: Path, run_id: str, ids: list[str]) -> bool:
    """Whether the catalog shows `run_id` finished with an attempt for every problem in `ids`."""
    if not (root / "library.id").exists() and not any(root.glob("*")):
        return False
    lib = library(root)
    run = lib.catalog.get_run(run_id)
    if run is None or run.status != "finished":
        return False
    return set(ids) <= {a.problem_id for a in lib.catalog.attempts_for_run(run_id)}


def per_problem(root: Path, run_id: str) -> dict[str, dict[str, Any]]:
    """Per problem of one run: attempt 0 verified and its route, any attempt verified, decode tokens."""
    rows: dict[str, list[Any]] = {}
    for a in library(root).catalog.attempts_for_run(run_id):
        rows.setdefault(a.problem_id, []).append(a)
    out = {}
    for pid, attempts in rows.items():
        attempts.sort(key=lambda a: a.attempt_index)
        first = attempts[0]
        out[pid] = {"first_verified": bool(first.attempt_index == 0 and first.verified),
                    "verified": any(a.verified for a in attempts), "route": first.route,
                    "attempts": len(attempts), "decode_tokens": sum(a.decode_tokens for a in attempts)}
    return out


def arm_figures(results: dict[str, dict[str, Any]], ids: list[str]) -> dict[str, Any]:
    from flywheel.stats import wilson

    got = [results[p] for p in ids if p in results]
    n = len(got)
    first = sum(r["first_verified"] for r in got)
    verified = sum(r["verified"] for r in got)
    tokens = sum(r["decode_tokens"] for r in got)
    routes = {k: sum(r["route"] == k for r in got) for k in ("exact", "near", "none")}
    return {"n": n, "missing": len(ids) - n, "first_verified": first, "first_ci95": wilson(first, n) if n else None,
            "verified": verified, "verified_ci95": wilson(verified, n) if n else None,
            "attempts": sum(r["attempts"] for r in got), "decode_tokens": tokens,
            "decode_tokens_per_verified": round(tokens / verified, 1) if verified else None, "routes": routes}


def paired(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], ids: list[str]) -> dict[str, Any]:
    """Arm A against arm B on attempt 0, paired by problem: exact McNemar, its power, the template sign test."""
    from flywheel.stats import mcnemar_exact, mcnemar_power

    both = [p for p in ids if p in a and p in b]
    only_a = sum(a[p]["first_verified"] and not b[p]["first_verified"] for p in both)
    only_b = sum(b[p]["first_verified"] and not a[p]["first_verified"] for p in both)
    by_template: dict[str, list[int]] = {}
    for p in both:
        m = _TEMPLATE.match(p)
        if m:
            counts = by_template.setdefault(m.group(1), [0, 0])
            counts[0] += a[p]["first_verified"]
            counts[1] += b[p]["first_verified"]
    more = sum(x > y for x, y in by_template.values())
    fewer = sum(x < y for x, y in by_template.values())
    return {"n": len(both), "flywheel": sum(a[p]["first_verified"] for p in both),
            "baseline": sum(b[p]["first_verified"] for p in both), "only_flywheel": only_a, "only_baseline": only_b,
            "mcnemar_p": mcnemar_exact(only_a, only_b), "power_3to1": mcnemar_power(only_a + only_b),
            "sign_test": {"templates": len(by_template), "flywheel_more": more, "baseline_more": fewer,
                          "tied": len(by_template) - more - fewer, "p": mcnemar_exact(more, fewer)}}


def run_slice(args: argparse.Namespace, arm: str, index: int, ids: list[str]) -> float:
    """Run (or finish) one arm's run over slice `index`; the seconds it took (0 when already done)."""
    root = args.work / arm / "lib"
    run_id = f"stream-{arm}-s{index}"
    if run_done(root, run_id, ids):
        log(f"{run_id}: finished before, {len(ids)} problems recorded")
        return 0.0
    cmd = [*flywheel_cli(), "--model", args.model, "--library", str(root), "run",
           "--problems", f"inbox:{args.work / arm / 'inbox'}", "--run-id", run_id,
           "--attempts", str(args.attempts), "--seed", str(args.seed), *ARM_FLAGS[arm], "--json"]
    if args.until_verified:
        cmd.append("--until-verified")
    if args.budget:
        cmd += ["--budget", str(args.budget)]
    log(f"{run_id}: {' '.join(cmd[1:])}")
    started = time.monotonic()
    with open(args.work / f"{run_id}.log", "a") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    seconds = time.monotonic() - started
    if rc != 0 or not run_done(root, run_id, ids):
        raise SystemExit(f"{run_id} exited {rc} after {seconds:.0f} s without finishing its slice; "
                         f"see {args.work / f'{run_id}.log'}; the same command resumes it")
    log(f"{run_id}: finished in {seconds:.0f} s")
    return seconds


def library_verify(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [*flywheel_cli(), "--model", args.model, "--library", str(args.work / "flywheel" / "lib"), "library", "verify"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    said = [line.replace(str(args.work), "<work>") for line in done.stdout.strip().splitlines()[-5:]]
    return {"command": "flywheel --model MODEL --library <work>/flywheel/lib library verify".replace("MODEL", args.model),
            "exit": done.returncode, "output": said}


def portable(argv: list[str], work: Path) -> str:
    """The command as run, with the work folder written `<work>` and paths inside the repository relative to it:
    a committed result never records this machine's absolute paths."""
    def one(arg: str) -> str:
        arg = arg.replace(str(work), "<work>")
        path = Path(arg)
        if path.is_absolute() and path.resolve().is_relative_to(ROOT):
            return str(path.resolve().relative_to(ROOT))
        return arg
    return " ".join(["bench/stream.py", *(one(a) for a in argv)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", type=Path, required=True, help="folder of the two arms' inboxes, libraries and logs")
    ap.add_argument("--slice", dest="slices", action="append", required=True,
                    help="a problem set spec, one slice; repeat in arrival order")
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems of each slice (a pilot)")
    ap.add_argument("--attempts", type=int, default=1)
    ap.add_argument("--until-verified", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--arms", default=",".join(ARMS), help="arms to run, in order per slice (default both)")
    ap.add_argument("--out", type=Path, help="write the result JSON here (else stdout)")
    args = ap.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    if any(a not in ARMS for a in arms):
        raise SystemExit(f"--arms takes {', '.join(ARMS)}")
    args.work.mkdir(parents=True, exist_ok=True)

    slices, seconds = [], {a: 0.0 for a in arms}
    for index, spec in enumerate(args.slices, start=1):
        per_arm = {}
        for arm in arms:
            ids, set_hash = drop_slice(args.work / arm / "inbox", index, spec, args.limit)
            seconds[arm] += run_slice(args, arm, index, ids)
            per_arm[arm] = per_problem(args.work / arm / "lib", f"stream-{arm}-s{index}")
        row: dict[str, Any] = {"slice": index, "spec": spec, "problem_set_hash": set_hash, "ids": ids}
        row.update({arm: arm_figures(per_arm[arm], ids) for arm in arms})
        if len(arms) == 2:
            row["paired"] = paired(per_arm["flywheel"], per_arm["baseline"], ids)
        row["_results"] = per_arm
        slices.append(row)
        log(f"slice {index}: " + "; ".join(f"{a} first-attempt {row[a]['first_verified']}/{row[a]['n']}, "
                                             f"verified {row[a]['verified']}, {row[a]['decode_tokens']} decode tokens"
                                             for a in arms))

    result: dict[str, Any] = {
        "mode": "stream", "model": args.model, "arms": arms, "attempts": args.attempts,
        "until_verified": args.until_verified, "seed": args.seed, "budget": args.budget, "limit": args.limit,
        "command": portable(list(argv if argv is not None else sys.argv[1:]), args.work),
        "run_seconds_this_invocation": {a: round(s) for a, s in seconds.items()},
    }
    if len(arms) == 2 and len(slices) > 1:
        later_ids = [p for row in slices[1:] for p in row["ids"]]
        fly = {p: r for row in slices[1:] for p, r in row["_results"]["flywheel"].items()}
        base = {p: r for row in slices[1:] for p, r in row["_results"]["baseline"].items()}
        result["later"] = {**paired(fly, base, later_ids),
                           "flywheel_figures": arm_figures(fly, later_ids), "baseline_figures": arm_figures(base, later_ids)}
    if "flywheel" in arms:
        result["library_verify"] = library_verify(args)
    problems = [{"slice": row["slice"], "arm": arm, "problem_id": pid, **r}
                for row in slices for arm in arms for pid, r in sorted(row["_results"][arm].items())]
    for row in slices:
        row.pop("_results")
        row.pop("ids")
    result["slices"] = slices
    text = json.dumps(result, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n")
        per_problem_file = args.out.with_name(args.out.stem + "-problems.jsonl")
        per_problem_file.write_text("".join(json.dumps(p, sort_keys=True) + "\n" for p in problems))
        log(f"wrote {args.out} and {per_problem_file}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
