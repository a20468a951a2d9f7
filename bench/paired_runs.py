"""Two arms from two studies (another model, another library) paired by problem: exact McNemar.

Reads the attempt files `bench/export_attempts.py` writes (one JSON line per attempt) and takes, from
each, attempt 0 (the greedy pass@1 one) of the run whose id ends with `-heldout-<arm>`. Problems
are paired by id; `--part near|far|all` keeps the GSM-Symbolic instances of train templates (near),
of held-out templates (far), or every problem both files hold.

    .venv/bin/python bench/paired_runs.py \\
        --a bench/results/issue32-cold-qwen2.5-coder-0.5b-attempts.jsonl --a-arm graft \\
        --b bench/results/issue32-base-qwen2.5-coder-1.5b-attempts.jsonl --b-arm none --part near
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

_TEMPLATE = re.compile(r"^gsm-symbolic-t(\d+)-")


def outcomes(path: Path, arm: str) -> dict[str, bool]:
    """problem id -> verified, for attempt 0 of the held-out run of `arm` in an exported attempts file."""
    suffix = f"-heldout-{arm}"
    rows: dict[str, bool] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        a = json.loads(line)
        if a["run_id"].endswith(suffix) and a["attempt"] == 0:
            if a["problem_id"] in rows:
                raise SystemExit(f"{path}: two held-out '{arm}' runs hold {a['problem_id']}: give one study's file")
            rows[a["problem_id"]] = bool(a["verified"])
    if not rows:
        raise SystemExit(f"{path}: no attempt 0 of a run ending in {suffix!r}")
    return rows


def in_part(problem_id: str, part: str) -> bool:
    """Whether a problem belongs to `part` (GSM-Symbolic near = train template, far = held-out template)."""
    if part == "all":
        return True
    from flywheel.sources.gsm_symbolic import split_of

    m = _TEMPLATE.match(problem_id)
    return m is not None and split_of(int(m.group(1))) == ("train" if part == "near" else "heldout")


def compare(a: dict[str, bool], b: dict[str, bool], part: str) -> dict[str, Any]:
    """A against B on the problems both hold in `part`: counts, Wilson intervals, exact McNemar and its power."""
    from flywheel.stats import mcnemar_exact, mcnemar_power, wilson

    ids = sorted(pid for pid in a.keys() & b.keys() if in_part(pid, part))
    n = len(ids)
    ca, cb = sum(a[p] for p in ids), sum(b[p] for p in ids)
    only_a = sum(a[p] and not b[p] for p in ids)
    only_b = sum(b[p] and not a[p] for p in ids)
    return {"part": part, "n": n, "only_in_a": len(a.keys() - b.keys()), "only_in_b": len(b.keys() - a.keys()),
            "a": {"correct": ca, "ci95": wilson(ca, n) if n else None},
            "b": {"correct": cb, "ci95": wilson(cb, n) if n else None},
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "power_3to1": mcnemar_power(only_a + only_b)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="attempts file of study A")
    ap.add_argument("--a-arm", required=True, help="A's held-out arm (none, graft, ...)")
    ap.add_argument("--b", type=Path, required=True, help="attempts file of study B")
    ap.add_argument("--b-arm", required=True, help="B's held-out arm")
    ap.add_argument("--part", choices=("near", "far", "all"), default="all")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    args = ap.parse_args(argv)
    out = compare(outcomes(args.a, args.a_arm), outcomes(args.b, args.b_arm), args.part)
    out.update(a_file=str(args.a), a_arm=args.a_arm, b_file=str(args.b), b_arm=args.b_arm)
    if args.json:
        print(json.dumps(out, sort_keys=True))
        return 0
    print(f"{args.part} ({out['n']} paired): A {args.a_arm} {out['a']['correct']}/{out['n']} vs B {args.b_arm} "
          f"{out['b']['correct']}/{out['n']}; only A {out['only_a']}, only B {out['only_b']}, exact McNemar "
          f"p = {out['mcnemar_p']:.3g} (power at a 3:1 split {out['power_3to1']:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
