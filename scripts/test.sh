#!/usr/bin/env bash
# The suite, as `make test` and CI run it. Starts whatever services the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
# The real models, prepared once per machine into the shared model cache (progress shown here
# rather than inside a test): the default Gemma 3 270M, SmolLM2-135M (the second architecture) and
# Qwen2.5-Coder-0.5B-Instruct (qwen2, asked in its chat format).
./.venv/bin/flywheel prepare-model
./.venv/bin/flywheel --model smollm2-135m prepare-model
./.venv/bin/flywheel --model qwen2.5-coder-0.5b prepare-model
./.venv/bin/ruff check flywheel verifiers flows tests bench
./.venv/bin/mypy flywheel verifiers flows

# A real PostgreSQL server on loopback for tests/deploy (installed from Debian's packages on
# first use, ~1 minute). Stopped again at exit if this run started it; a server that was
# already running (e.g. a developer's) is reused and left running.
if [[ -z "${FLYWHEEL_TEST_PG_URL:-}" ]]; then
    eval "$(bash scripts/services/postgres.sh start)"
    if [[ "${FLYWHEEL_TEST_PG_STARTED:-0}" == "1" ]]; then
        trap 'bash scripts/services/postgres.sh stop || true' EXIT
    fi
fi

./.venv/bin/python -m pytest -q --durations=25 "$@"   # the 25 slowest tests: CI time is a budget
