"""The project's own linear kernel over GGUF blocks (`qgemm.cpp`), its build, and its Python face.

`qgemm.cpp` is compiled from this folder on first use (or by `flywheel build-kernel`, which `make install`
runs) with torch's extension tooling into the shared cache, keyed by the source's SHA-256 and torch's
version; a machine without a compiler gets one line saying so and runs the fp32 weights.

Numerics modes (each its own name in the fingerprint, see `WEIGHTS`):

* `q-f32a` — the GGUF's exact weights (int8 code x fp32 scale, formed in registers) with fp32 activations;
* `q-i8a`  — per-row int8 activations (blocks of 32) with integer dot products: llama.cpp's class of numerics.

Both are batch-invariant by construction (one output feature per vector lane, K reduced in one fixed order,
threads split over output features): see the header of `qgemm.cpp`. The variants (`avx512-vnni`, `avx2`,
`portable`) perform the same IEEE operations in the same order and give the same bits; the one that ran
is still recorded (`isa`), as the issue asks, so a surprise would be refused rather than compared.

    >>> from flywheel import kernels
    >>> kernels.problem() is None or isinstance(kernels.problem(), str)
    True
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import Literal

import torch

from flywheel import config
from flywheel.errors import InputError
from flywheel.kernels.blocks import Packed

SOURCE = Path(__file__).with_name("qgemm.cpp")
#: Bump with any change to qgemm.cpp's arithmetic (it changes bits): part of every quantized fingerprint.
KERNEL_VERSION = "qgemm-v2"
#: Forces a variant at or below what the CPU supports (`portable`, `avx2`, `avx512-vnni`): for tests and
#: for benchmarking the AVX2 path on an AVX-512 host.
ENV_ISA = "FLYWHEEL_KERNEL_ISA"
VARIANTS = ("portable", "avx2", "avx512-vnni")

Mode = Literal["q-f32a", "q-i8a"]
MODES: dict[str, int] = {"q-f32a": 0, "q-i8a": 1}

_lock = threading.Lock()
_state: dict[str, str | bool] = {}


def build_dir() -> Path:
    """Where this source, built against this torch, lives: the shared cache, keyed by both."""
    key = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()).hexdigest()[:16]
    return config.model_cache_dir().parent / "kernels" / f"qgemm-{key}"


def _build(verbose: bool) -> None:
    from torch.utils import cpp_extension

    out = build_dir()
    out.mkdir(parents=True, exist_ok=True)
    # ninja from PyPI lives beside this interpreter, which need not be on PATH (`.venv/bin/flywheel`)
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")
    # No fast-math, no contraction: the arithmetic is exactly what the source writes (-O3 vectorizes
    # the portable loops across lanes only, which reorders nothing within a lane).
    cpp_extension.load(name="flywheel_qgemm", sources=[str(SOURCE)], build_directory=str(out),
                       extra_cflags=["-O3", "-ffp-contract=off", "-fno-fast-math"],
                       is_python_module=False, verbose=verbose)


def load(*, verbose: bool = False) -> str | None:
    """Build (once per machine) and load the kernel; None when it is ready, else why it is not (one line)."""
    with _lock:
        if "problem" in _state:
            return _state["problem"] or None  # type: ignore[return-value]
        problem = ""
        try:
            if not hasattr(torch.ops.flywheel_qgemm, "qlinear"):
                _build(verbose)
        except Exception as err:  # a missing compiler, ninja or header: the fp32 path still runs
            lines = str(err).strip().splitlines()
            said = next((ln.strip() for ln in lines if "error" in ln.lower() and "build stopped" not in ln),
                        lines[-1] if lines else type(err).__name__)
            problem = f"the qgemm kernel could not be built here ({said[:300]})"
        _state["problem"] = problem
        return problem or None


def problem() -> str | None:
    """Why the kernel cannot run here (built on first call), or None."""
    return load()


def variant() -> str:
    """The variant that runs: the best this CPU supports, or `FLYWHEEL_KERNEL_ISA` when set (and supported)."""
    why = load()
    if why:
        raise InputError(why, hint="install a C++ compiler (g++) and ninja, or use --weights fp32")
    best = int(torch.ops.flywheel_qgemm.best_variant())
    forced = os.environ.get(ENV_ISA)
    if not forced:
        return VARIANTS[best]
    if forced not in VARIANTS:
        raise InputError(f"{ENV_ISA}={forced!r} is not a kernel variant", hint=f"one of {', '.join(VARIANTS)}")
    if VARIANTS.index(forced) > best:
        raise InputError(f"{ENV_ISA}={forced} cannot run on this CPU (best: {VARIANTS[best]})")
    return forced


def qlinear(x: torch.Tensor, packed: Packed, bias: torch.Tensor | None, *, mode: str,
            isa: str | None = None) -> torch.Tensor:
    """y = x @ W.T (+ bias) for W in packed blocks (`blocks.pack`); x (M, K) float32 -> (M, N)."""
    runs = variant()   # builds and loads the kernel on first use
    isa = isa or runs
    return torch.ops.flywheel_qgemm.qlinear(
        x, packed.codes, packed.scales, packed.offsets, bias if bias is not None else _EMPTY,
        packed.n, packed.group, MODES[mode], VARIANTS.index(isa))


_EMPTY = torch.empty(0, dtype=torch.float32)


def say(message: str) -> None:
    print(f"[flywheel] {message}", file=sys.stderr, flush=True)
