"""Every recorded attempt of a study's runs, one JSON line each, with the SHA-256 of its text.

What a pre-registered run keeps beside its summary (BENCHMARKS.md): a third party can re-score the
answers, and check any attempt's text against the catalog it came from.

    .venv/bin/python bench/export_attempts.py --library /tmp/prereg/gemma/lib --study out.json > attempts.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", required=True, help="library root")
    ap.add_argument("--study", required=True, help="the study's JSON (`flywheel study --json` output): its runs")
    args = ap.parse_args(argv)
    from flows import runtime
    from flywheel import config

    root = Path(args.library)
    lib = runtime.library(str(root), config.database_url(root, None))
    study = json.loads(Path(args.study).read_text().strip().splitlines()[-1])
    runs = [p["run_id"] for p in study["passes"]] + [
        r for arm in study["arms"]["accuracy"].values() for r in arm["run_ids"]]
    for run_id in runs:
        for a in sorted(lib.catalog.attempts_for_run(run_id), key=lambda a: (a.problem_id, a.attempt_index)):
            text = a.text or ""
            print(json.dumps({"run_id": run_id, "problem_id": a.problem_id, "attempt": a.attempt_index,
                              "seed": a.seed, "route": a.route, "answer": a.answer, "verified": bool(a.verified),
                              "decode_tokens": a.decode_tokens, "tool_tokens": a.tool_tokens,
                              "text_sha256": hashlib.sha256(text.encode()).hexdigest()}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
