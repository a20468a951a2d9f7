#!/usr/bin/env bash
# The main job on the embedded defaults (what `make run` runs after installing and preparing).
set -euo pipefail
cd "$(dirname "$0")/.."
FLYWHEEL=./.venv/bin/flywheel
echo "== 1. Byte-exact graft on the default model (own position, past the 512-token window; shifted control)"
$FLYWHEEL verify-graft --samples 6 --prefix-tokens 35 600 1200 --offset 3
echo
echo "== 2. Restoring a 2,048-token artifact from disk vs recomputing its prefill"
./.venv/bin/python bench/graft_vs_prefill.py --tokens 2048
