#!/usr/bin/env bash
# After resume.sh has finished the `none` arm (its JSON at /tmp/k4-15-none/out.json): export every attempt, check
# the arm is whole (1,000 attempts: 200 greedy, 4 sampled per problem) and that its greedy run reproduces the
# 1.5B base run attempt by attempt (registered in bench/preregistered/issue32-sampled-1.5b.md), write the two
# result files, then print every registered comparison against the finished `graft` arm:
# pass@1 / maj@4 / pass@4 on near, far and all, with decode tokens, and near again by template.
#   bash bench/interrupted/issue32-sampled-none-1.5b/finish.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
OUT=/tmp/k4-15-none/out.json
NONE=bench/results/issue32-sampled-none-qwen2.5-coder-1.5b
GRAFT=bench/results/issue32-sampled-graft-qwen2.5-coder-1.5b-attempts.jsonl
python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$OUT" \
  || { echo "$OUT is not a finished study's JSON: run resume.sh to the end first" >&2; exit 1; }
.venv/bin/python bench/export_attempts.py --library /tmp/k4-15-none/lib --study "$OUT" > /tmp/k4-15-none/attempts.jsonl
python3 - /tmp/k4-15-none/attempts.jsonl <<'PY'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
kinds = collections.Counter(r["run_id"].split("-heldout-")[-1] for r in rows)
if kinds != {"none": 200, "none-k4": 800}:
    sys.exit(f"attempts by run {dict(kinds)}: not 200 greedy + 800 sampled, the arm is not whole")
per = collections.Counter(r["problem_id"] for r in rows if r["run_id"].endswith("-k4"))
if set(per.values()) != {4} or len(per) != 200:
    sys.exit(f"sampled attempts per problem {collections.Counter(per.values())}: not 4 for each of 200")
print("1,000 attempts: 200 greedy, 4 sampled for each of 200 problems")
PY
.venv/bin/python bench/same_attempts.py --a bench/results/issue32-base-qwen2.5-coder-1.5b-attempts.jsonl \
    --b /tmp/k4-15-none/attempts.jsonl --kind heldout-none \
  || echo "REPRODUCIBILITY CHECK FAILED: the greedy run differs from the base run; say so in the prereg (registered)"
cp "$OUT" "$NONE.json"
cp /tmp/k4-15-none/attempts.jsonl "$NONE-attempts.jsonl"
sha256sum "$NONE.json" "$NONE-attempts.jsonl"
for measure in pass@1 maj@4 pass@4; do
  for part in near far all; do
    .venv/bin/python bench/paired_runs.py --a "$GRAFT" --a-arm graft --b "$NONE-attempts.jsonl" --b-arm none \
        --part "$part" --measure "$measure"
  done
  .venv/bin/python bench/paired_runs.py --a "$GRAFT" --a-arm graft --b "$NONE-attempts.jsonl" --b-arm none \
      --part near --measure "$measure" --by-template | tail -1
done
