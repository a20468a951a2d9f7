"""Did a re-run reproduce a recorded one? Two exported attempt files compared attempt by attempt.

Reads the files `bench/export_attempts.py` writes and matches their runs by kind — a run id without its
study tag (`run-20261205T183807Z-8dd1f0-train1` is `train1`, `...-heldout-none-k4` is `heldout-none-k4`) —
then each attempt by problem and attempt index. An attempt reproduces when its text's SHA-256, verdict,
answer and decode tokens are all equal. Prints one line per run kind of B and exits 1 if any attempt of B
is missing from A or differs (the pre-registered reproducibility checks: a rebuilt library's train passes, a
greedy arm run again).

    .venv/bin/python bench/same_attempts.py \\
        --a bench/results/issue32-cold-qwen2.5-coder-0.5b-attempts.jsonl --b /tmp/cold32/attempts.jsonl
    .venv/bin/python bench/same_attempts.py --a recorded.jsonl --b rerun.jsonl --kind heldout-none
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

_TAG = re.compile(r"^run-\d{8}T\d{6}Z-[0-9a-f]+-")
_COMPARED = ("text_sha256", "verified", "answer", "decode_tokens")


def by_kind(path: Path) -> dict[str, dict[tuple[str, int], tuple[Any, ...]]]:
    """run kind -> (problem id, attempt index) -> the compared fields, from one attempts file."""
    out: dict[str, dict[tuple[str, int], tuple[Any, ...]]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        a = json.loads(line)
        missing = [f for f in ("run_id", "problem_id", "attempt", *_COMPARED) if f not in a]
        if missing:
            raise SystemExit(f"{path}:{n}: no {', '.join(missing)} (write it with bench/export_attempts.py)")
        kind = _TAG.sub("", a["run_id"])
        out.setdefault(kind, {})[(a["problem_id"], a["attempt"])] = tuple(a[f] for f in _COMPARED)
    return out


def compare(a: dict[str, dict[tuple[str, int], tuple[Any, ...]]],
            b: dict[str, dict[tuple[str, int], tuple[Any, ...]]], kinds: list[str] | None) -> list[dict[str, Any]]:
    """Per run kind of B (or of `kinds`): how many attempts, how many A holds, how many equal, which differ."""
    rows = []
    for kind in kinds or sorted(b):
        if kind not in b:
            raise SystemExit(f"B has no run of kind {kind!r}; it has {', '.join(sorted(b)) or 'none'}")
        mine, theirs = b[kind], a.get(kind, {})
        differ = sorted(k for k in mine if k in theirs and theirs[k] != mine[k])
        rows.append({"kind": kind, "attempts": len(mine), "in_a": sum(k in theirs for k in mine),
                     "identical": sum(theirs.get(k) == v for k, v in mine.items()),
                     "verified": sum(bool(v[1]) for v in mine.values()),
                     "differ": [f"{pid}#{i}" for pid, i in differ[:10]]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="the recorded attempts file")
    ap.add_argument("--b", type=Path, required=True, help="the re-run's attempts file (each of its attempts is checked)")
    ap.add_argument("--kind", action="append", help="check only this run kind (repeatable), e.g. train1, heldout-none")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = ap.parse_args(argv)
    rows = compare(by_kind(args.a), by_kind(args.b), args.kind)
    same = all(r["identical"] == r["attempts"] for r in rows)
    if args.json:
        print(json.dumps({"reproduced": same, "kinds": rows}, sort_keys=True))
    else:
        for r in rows:
            print(f"{r['kind']}: {r['identical']}/{r['attempts']} identical ({r['in_a']} in A, "
                  f"{r['verified']} verified)" + (f"; differ: {', '.join(r['differ'])}" if r["differ"] else ""))
        print("reproduced" if same else "NOT reproduced")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
