#!/usr/bin/env bash
# The main job on the embedded defaults (what `make run` runs after installing and preparing):
# one check of the exactness claim on the default model, then the flywheel over a stream on Qwen 0.5B and its report.
set -euo pipefail
cd "$(dirname "$0")/.."
FLYWHEEL=./.venv/bin/flywheel
export PREFECT_HOME="${PREFECT_HOME:-$PWD/library/runs/prefect-home}"   # Prefect's temporary local server
WORKDIR="library/runs/demo-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$PREFECT_HOME" "$WORKDIR"

echo "== 1. Byte-exact graft on the default model (own position, past the 512-token window; shifted control)"
$FLYWHEEL verify-graft --samples 3 --prefix-tokens 35 600 1200 --offset 3
echo
echo "== 1b. The same inside the batched decode schedule (4 slots, samples as each other's neighbours)"
$FLYWHEEL verify-graft --slots 4 --samples 4 --prefix-tokens 35 600
echo
echo "== 2. The flywheel on a model that reasons (qwen2.5-coder-0.5b in its chat format), as a scheduled user runs it:"
echo "   the slices of library/stream arrive one by one in an inbox and one run takes each (greedy first, one"
echo "   sampled retry only where that failed); each run deposits what it verified and grafts what the library"
echo "   holds; then the last slice again without the library, the control (library and catalog in $WORKDIR)"
$FLYWHEEL --model qwen2.5-coder-0.5b prepare-model
$FLYWHEEL --model qwen2.5-coder-0.5b demo --stream library/stream --workdir "$WORKDIR"
$FLYWHEEL --library "$WORKDIR/library" report --format csv --plot "$WORKDIR/report.png" > "$WORKDIR/report.csv"
echo
echo "One row per attempt: $WORKDIR/report.csv; plot: $WORKDIR/report.png"
echo "Explore it: $FLYWHEEL --library $WORKDIR/library report --format md"
echo "            $FLYWHEEL --library $WORKDIR/library library ls"
