"""The qgemm kernel: GGUF block decoding bit-equal to gguf-py, rows batch-invariant, variants bit-equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from flywheel import kernels
from flywheel.engine import Engine, EngineSettings
from flywheel.errors import InputError, ModelError
from flywheel.kernels import blocks as kb
from flywheel.kernels import prepared
from flywheel.testing import add_tiny_blocks, build_tiny_model

pytestmark = pytest.mark.skipif(kernels.problem() is not None, reason="the kernel cannot be built here")

RNG = np.random.default_rng(7)


def _random_raw(type_name: str, n_blocks: int) -> np.ndarray:
    """Random bytes for `n_blocks` blocks, with each fp16 scale field set to a finite, sane value."""
    size, _, _ = kb.DECODERS[type_name]
    raw = RNG.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    fields = {"Q8_0": [0], "Q5_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q4_K": [0, 2], "Q6_K": [208]}[type_name]
    for at in fields:
        raw[:, at:at + 2] = (RNG.random(n_blocks) * 0.01 + 1e-4).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


@pytest.mark.parametrize("type_name", sorted(kb.DECODERS))
def test_blocks_reproduce_gguf_dequantization_bit_for_bit(type_name: str) -> None:
    """Codes x scales (+ offsets) formed as the kernel forms them equal gguf-py's dequantized fp32 exactly."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    n, k = 3, 512
    raw = _random_raw(type_name, n * k // kb.DECODERS[type_name][1])
    expected = dequantize(raw, GGMLQuantizationType[type_name]).reshape(n, k)
    got = kb.dequantize(kb.decode(type_name, raw, n, k)).numpy()
    assert got.tobytes() == expected.astype(np.float32).tobytes()


def _random_blocks(n: int, k: int, group: int, kind: str) -> kb.Blocks:
    if kind == "unsigned+offsets":
        codes = RNG.integers(0, 16, size=(n, k))
        offsets = (RNG.standard_normal((n, k // group)) * 0.01).astype(np.float32)
    else:
        codes, offsets = RNG.integers(-127, 128, size=(n, k)), None
    scales = (RNG.random((n, k // group)) * 0.02).astype(np.float32)
    return kb.Blocks("test", codes.astype(np.int16), scales, offsets, group)


def _run(p: kb.Packed, x: torch.Tensor, bias: torch.Tensor | None, mode: str, isa: str | None = None) -> torch.Tensor:
    return kernels.qlinear(x, p, bias, mode=mode, isa=isa)


# The tiny models' linear shapes (hidden 64, MLP 128, vocabularies 259 and 261) and both group sizes.
SHAPES = [(64, 64, 32, "signed"), (128, 64, 16, "signed"), (64, 128, 32, "unsigned+offsets"), (259, 64, 32, "signed"),
          (261, 64, 16, "signed")]


@pytest.mark.parametrize("mode", sorted(kernels.MODES))
@pytest.mark.parametrize(("n", "k", "group", "kind"), SHAPES)
def test_rows_are_batch_invariant_for_every_m_position_thread_count_and_variant(
        mode: str, n: int, k: int, group: int, kind: str) -> None:
    """A row's bytes are the same alone, at any position of a batch of any M (1..64), on 1 or 2 threads and
    on every variant this CPU runs."""
    p = kb.pack(_random_blocks(n, k, group, kind))
    bias = torch.randn(n) if n % 2 else None
    x = torch.randn(64, k)
    alone = torch.cat([_run(p, x[i:i + 1].contiguous(), bias, mode) for i in range(64)])
    threads = torch.get_num_threads()
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            for m in range(1, 65):
                for start in sorted({0, 64 - m, (64 - m) // 2}):
                    got = _run(p, x[start:start + m].contiguous(), bias, mode)
                    assert torch.equal(got, alone[start:start + m]), (t, m, start)
    finally:
        torch.set_num_threads(threads)
    runnable = kernels.VARIANTS[:kernels.VARIANTS.index(kernels.variant()) + 1]
    for isa in runnable:
        assert torch.equal(_run(p, x, bias, mode, isa), alone), isa
    assert torch.equal(_run(p, x, bias, mode), alone)   # repeated runs: equal


@pytest.mark.parametrize(("n", "k", "group", "kind"), SHAPES)
def test_modes_compute_the_linear(n: int, k: int, group: int, kind: str) -> None:
    """f32a is the fp32 product up to summation order; i8a within int8-activation error of it."""
    b = _random_blocks(n, k, group, kind)
    p, w = kb.pack(b), kb.dequantize(b)
    x = torch.randn(9, k)
    ref = (x.double() @ w.double().T).float()
    scale = ref.abs().max().item()
    assert (_run(p, x, None, "q-f32a") - ref).abs().max().item() <= 1e-5 * scale
    err = (_run(p, x, None, "q-i8a") - ref).abs().max().item()
    assert 0 < err <= 0.03 * scale   # int8 activations: not exact, close


def test_pack_refuses_what_the_kernel_cannot_take() -> None:
    with pytest.raises(ValueError, match="divisible by 32"):
        kb.pack(kb.Blocks("t", np.zeros((4, 48), dtype=np.int16), np.ones((4, 3), np.float32), None, 16))
    codes = np.zeros((4, 32), dtype=np.int16)
    codes[1, 5] = -128   # no ggml quantizer writes it; AVX2's sign trick could not take it
    with pytest.raises(ValueError, match="outside -127..127"):
        kb.pack(kb.Blocks("Q8_0", codes, np.ones((4, 1), np.float32), None, 32))


def test_pack_round_trips() -> None:
    b = _random_blocks(37, 64, 16, "unsigned+offsets")
    assert torch.equal(kb.dequantize_packed(kb.pack(b)), kb.dequantize(b))


@pytest.fixture(scope="module")
def tiny_blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return add_tiny_blocks(build_tiny_model("qwen2", tmp_path_factory.mktemp("tiny-blocks") / "qwen2"))


def test_quantized_engine_is_its_own_fingerprint_and_refuses_fp32_artifacts(tiny_blocks: Path) -> None:
    from flywheel.errors import FingerprintMismatchError
    from flywheel.kv.graft import capture, graft

    fp32 = Engine.load(str(tiny_blocks), EngineSettings(weights="fp32"), progress=False)
    q = Engine.load(str(tiny_blocks), EngineSettings(weights="q-i8a"), progress=False)
    assert q.settings.weights == "q-i8a" and fp32.settings.weights == "fp32"
    assert q.fingerprint.extra["kernel"] == kernels.KERNEL_VERSION
    assert q.fingerprint.extra["isa"] == kernels.variant()
    assert q.fingerprint.digest != fp32.fingerprint.digest
    assert fp32.fingerprint.extra == {}
    ids = fp32.encode("12+7=")
    cache, logits = fp32.prefill(ids)
    artifact = capture(fp32, cache, ids, logits[-1])
    with pytest.raises(FingerprintMismatchError, match="extra"):
        graft(q, artifact)
    assert graft(fp32, artifact).cache is not None


def test_quantized_graft_equals_fresh_in_the_slot_schedule(tiny_blocks: Path) -> None:
    from flywheel.kv import exactness

    q = Engine.load(str(tiny_blocks), EngineSettings(weights="q-i8a"), progress=False, prompt_format="chat")
    report = exactness.run_slots(q, samples=4, prefix_tokens=[24, 80], slots=3)
    assert report.sha_equal == 4 and report.kl_max == 0.0


def test_tampered_block_file_is_refused(tiny_blocks: Path, tmp_path: Path) -> None:
    import shutil

    copy = Path(shutil.copytree(tiny_blocks, tmp_path / "copy"))
    blob = bytearray((copy / prepared.BLOCKS_FILE).read_bytes())
    blob[-1] ^= 1
    (copy / prepared.BLOCKS_FILE).write_bytes(bytes(blob))
    with pytest.raises(ModelError, match="does not match its recorded SHA-256"):
        Engine.load(str(copy), EngineSettings(weights="q-i8a"), progress=False)


def test_model_without_blocks_runs_fp32_by_default_and_refuses_a_named_mode(tiny_dirs: dict[str, Path]) -> None:
    plain = Engine.load(str(tiny_dirs["llama"]), EngineSettings(weights="default"), progress=False)
    assert plain.settings.weights == "fp32"
    with pytest.raises(InputError, match="no GGUF blocks"):
        Engine.load(str(tiny_dirs["llama"]), EngineSettings(weights="q-i8a"), progress=False)


def test_without_a_compiler_the_default_runs_fp32_with_one_line(tiny_blocks: Path, tmp_path: Path) -> None:
    """A machine with no C++ compiler: the kernel is not built, `default` says so in one line and runs fp32."""
    script = (
        "import json, sys\n"
        "from flywheel import kernels\n"
        "from flywheel.engine import Engine, EngineSettings\n"
        f"e = Engine.load({str(tiny_blocks)!r}, EngineSettings(weights='default'))\n"
        "print(json.dumps({'problem': kernels.problem(), 'weights': e.settings.weights}))\n")
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), "FLYWHEEL_MODEL_CACHE": str(tmp_path / "models")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["weights"] == "fp32" and "could not be built" in out["problem"]
    assert sum("running" in line and "fp32 weights" in line for line in proc.stderr.splitlines()) == 1
