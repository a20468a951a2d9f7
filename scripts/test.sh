#!/usr/bin/env bash
# The suite, as `make test` and CI run it. Starts whatever services the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
./.venv/bin/flywheel prepare-model          # the real default model, prepared once per machine
./.venv/bin/ruff check flywheel verifiers flows tests bench
./.venv/bin/python -m pytest -q "$@"
