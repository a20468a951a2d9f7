"""Dev probe for the calculator lever (train split and dev seeds only; never the held-out split).

A fresh library gets one curated sibling per word family (train split, seed 1); then the same
dev problems (train split, `--seed`, disjoint from the siblings) run as four arms, paired, greedy,
no deposits (so every arm sees the same library): no graft; no graft + calculator; near graft;
near graft + calculator. Printed per arm: verified, answered, decode and tool tokens, and the
exact McNemar p of calculator vs not (same graft setting), per family where it moved.

    .venv/bin/python bench/calculator_probe.py                  # 2 per family x 10 families, budget 96
    .venv/bin/python bench/calculator_probe.py --per-family 4 --near-members 2 --json

This chooses a default on dev data; the reported figures come from `flywheel study` on held-out
seeds fixed before it runs (BENCHMARKS.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from flywheel import config  # noqa: E402
from flywheel.stats import mcnemar_exact  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2, help="dev seed of the train split (the siblings use seed 1)")
    ap.add_argument("--budget", type=int, default=96)
    ap.add_argument("--near-members", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows import runtime
    from flows.demo import family_seeds
    from flows.run import RunConfig, flywheel_run
    from flywheel.router import RouterConfig

    spec = f"gen:all?n={args.per_family}&seed={args.seed}&split=train"
    arms: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="calc-probe-") as tmp:
        root = Path(tmp) / "library"
        eng = runtime.engine(args.model)
        lib = runtime.library(str(root), config.database_url(root, None), RouterConfig())
        siblings = {p.text for p in family_seeds()}
        for p in family_seeds():
            lib.deposit(eng, p, p.solution or "", p.reference or "", deposited_by="curator:probe")
        for name, no_graft, calc in (("no graft", True, False), ("no graft + calculator", True, True),
                                     ("graft", False, False), ("graft + calculator", False, True)):
            start = time.perf_counter()
            out = flywheel_run(RunConfig(problems=spec, budget=args.budget, attempts=1, no_graft=no_graft,
                                         deposit=False, calculator=calc, library=str(root), model=args.model,
                                         near_members=args.near_members, run_id=f"probe-{name.replace(' ', '-')}"))
            arms[name] = {"verified": {r["problem_id"]: r["verified"] for r in out["results"]},
                          "answered": sum(r["answer"] is not None for r in out["results"]),
                          "decode_tokens": out["totals"]["decode_tokens"], "tool_tokens": out["totals"]["tool_tokens"],
                          "seconds": time.perf_counter() - start,
                          "routes": sorted({r["route"] for r in out["results"]})}
    problems = sorted(arms["graft"]["verified"])
    assert not siblings & set(problems)
    rows = []
    for name, arm in arms.items():
        rows.append({"arm": name, "verified": sum(arm["verified"].values()), "n": len(problems),
                     **{k: arm[k] for k in ("answered", "decode_tokens", "tool_tokens", "seconds", "routes")}})
    tests = {}
    for base, tool in (("no graft", "no graft + calculator"), ("graft", "graft + calculator")):
        b = sum(arms[tool]["verified"][p] and not arms[base]["verified"][p] for p in problems)
        c = sum(arms[base]["verified"][p] and not arms[tool]["verified"][p] for p in problems)
        tests[f"{tool} vs {base}"] = {"gained": b, "lost": c, "mcnemar_p": mcnemar_exact(b, c)}
    report = {"problems": spec, "budget": args.budget, "near_members": args.near_members, "arms": rows,
              "tests": tests, "model": args.model}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{spec}, greedy, budget {args.budget}, {args.near_members} near member(s), {args.model}")
    for r in rows:
        print(f"  {r['arm']:24s} {r['verified']:3d}/{r['n']} verified, {r['answered']:3d} answered, "
              f"{r['decode_tokens']:6d} decode + {r['tool_tokens']:4d} tool tokens, {r['seconds']:.0f} s, routes {r['routes']}")
    for name, t in tests.items():
        print(f"  {name}: +{t['gained']} -{t['lost']}, exact McNemar p = {t['mcnemar_p']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
