"""`flywheel.engine` directly: the same tokens in the same chunks give the same bits, tokens and
stop rules, and the fingerprint that says what an artifact's bytes mean."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from flywheel import config
from flywheel.decode import DecodeRequest, decode_alone
from flywheel.engine import CPU_ISA_CAPS, Engine, EngineSettings, StopRule, cpu_isa, device_name
from flywheel.errors import InputError, ModelError
from tests.test_attempt import scripted  # the tiny model, decoding a fixed continuation

TEXT = "Solve for x: 3x + 8 = 35. Subtract 8 from both sides, then divide by 3."


def test_the_same_tokens_in_the_same_chunks_give_the_same_bits(tiny_gemma: Engine) -> None:
    ids = tiny_gemma.encode(TEXT)
    _, first = tiny_gemma.prefill(ids, chunk=8, keep=3)
    _, again = tiny_gemma.prefill(ids, chunk=8, keep=3)
    assert first.shape == (3, again.shape[-1]) and torch.equal(first, again)


def test_prefill_is_forward_chunk_by_chunk_on_one_cache(tiny_llama: Engine) -> None:
    ids = tiny_llama.encode(TEXT)
    cache, logits = tiny_llama.prefill(ids, chunk=5)
    by_hand = tiny_llama.new_cache()
    for start in range(0, len(ids), 5):
        last = tiny_llama.forward(ids[start:start + 5], by_hand)
    assert torch.equal(logits, last) and cache.get_seq_length() == by_hand.get_seq_length() == len(ids)


def test_encode_puts_bos_first_only_when_asked_and_decodes_back(tiny_gemma: Engine) -> None:
    bos = tiny_gemma.tokenizer.bos_token_id
    with_bos, bare = tiny_gemma.encode(TEXT), tiny_gemma.encode(TEXT, bos=False)
    assert bos is not None and with_bos == [bos, *bare] and bos not in bare
    assert tiny_gemma.decode_text(with_bos) == tiny_gemma.decode_text(bare) == TEXT


def test_the_model_is_never_run_on_zero_tokens(tiny_gemma: Engine) -> None:
    with pytest.raises(InputError, match="zero tokens"):
        tiny_gemma.forward([], tiny_gemma.new_cache())


def test_decoding_alone_stops_only_where_it_is_told(tiny_gemma: Engine) -> None:
    eng = scripted(tiny_gemma, "12\n34\n56")

    def decoded(max_new: int, stop: StopRule) -> str:
        c, lg = eng.prefill(eng.encode("2+3="))
        return eng.decode_text(decode_alone(eng, DecodeRequest(c, lg[-1], max_new, stop=stop)).tokens)

    assert decoded(4, StopRule(newline=False)) == "12\n3"         # no line rule: the budget ends it
    assert decoded(64, StopRule(newline=False)) == "12\n34\n56"   # ... or EOS, after the script
    assert decoded(64, StopRule()) == "12\n"            # the first line of text
    assert decoded(64, StopRule(newline=False)) == "12\n34\n56"


def test_the_fingerprint_pins_what_changes_bits_and_round_trips(tiny_gemma: Engine, tiny_dirs: dict[str, Path],
                                                                tmp_path: Path) -> None:
    fp = tiny_gemma.fingerprint
    assert EngineSettings().dtype == config.DEFAULT_DTYPE == fp.dtype
    assert type(fp).from_dict(fp.to_dict()) == fp and len(fp.digest) == 64
    bf16 = dataclasses.replace(fp, dtype="bfloat16")
    assert fp.differences(bf16) == ["dtype"] and bf16.digest != fp.digest
    assert fp.differences(dataclasses.replace(fp, model="renamed")) == []   # a renamed model is the same model
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dirs["gemma3"], copy)
    assert Engine.load(str(copy), progress=False).fingerprint.weights_sha256 == fp.weights_sha256


def test_hosts_of_one_cpu_name_with_other_instruction_sets_are_other_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    for cap in CPU_ISA_CAPS:
        monkeypatch.delenv(cap, raising=False)
    avx2 = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 fma avx2\n"
    avx512 = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 fma avx2 avx512f avx512bw avx512_bf16\n"
    assert cpu_isa(avx2).split()[1:] == ["fma", "avx2"]
    assert cpu_isa(avx512).split()[1:] == ["fma", "avx2", "avx512f", "avx512bw", "avx512_bf16"]
    assert cpu_isa("model name\t: ?\n").endswith("flags-unknown")   # unknown flags never match known ones
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")                     # a cap changes the kernels too
    assert cpu_isa(avx512).endswith("ONEDNN_MAX_CPU_ISA=AVX2")
    assert f"[{cpu_isa()}]" in device_name(torch.device("cpu"))


def test_a_folder_without_safetensors_weights_is_refused(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "no-weights"
    shutil.copytree(tiny_dirs["gemma3"], folder)
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    with pytest.raises(ModelError):
        Engine.load(str(folder), progress=False)
