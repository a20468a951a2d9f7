#!/usr/bin/env bash
# The main job on the embedded defaults (what `make run` runs after installing and preparing):
# one check of the exactness claim, then a real flywheel on the default model and its report.
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
echo "== 2. The flywheel: the starter library (one verified sibling per word family); pass 1 samples 4 attempts per problem"
echo "   on batched decode slots and deposits what the model verifies itself; its fresh problems run again"
echo "   without grafts (what the library did to problems it never held); curated CHAMP solutions are"
echo "   deposited; pass 2 answers the recurring problems from grafts (library and catalog in $WORKDIR)"
$FLYWHEEL demo --workdir "$WORKDIR"
$FLYWHEEL --library "$WORKDIR/library" report --format csv --plot "$WORKDIR/report.png" > "$WORKDIR/report.csv"
echo
echo "One row per attempt: $WORKDIR/report.csv; plot: $WORKDIR/report.png"
echo "Explore it: $FLYWHEEL --library $WORKDIR/library report --format md"
echo "            $FLYWHEEL --library $WORKDIR/library library ls"
