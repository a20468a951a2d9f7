"""The artifact format: self-describing, content-addressed, and refused whole when anything is off."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from flywheel.engine import Engine, EngineSettings
from flywheel.errors import (
    ArtifactIntegrityError,
    ArtifactMalformedError,
    ArtifactVersionError,
    FingerprintMismatchError,
)
from flywheel.kv import Artifact, capture, graft, parse_artifact, read_artifact
from flywheel.kv.artifact import _split
from flywheel.kv.exactness import corpus_ids
from flywheel.testing import TINY_SLIDING_WINDOW, build_tiny_model


@pytest.fixture(scope="module")
def artifact(tiny_gemma: Engine) -> Artifact:
    ids = corpus_ids(tiny_gemma, 3 * TINY_SLIDING_WINDOW)
    cache, last = tiny_gemma.prefill(ids, chunk=8)
    return capture(tiny_gemma, cache, ids, last, prefill_chunk=8, meta={"problem_id": "p1"})


def _rewrite_header(data: bytes, edit: object) -> bytes:
    """Re-pack a file with its flywheel header edited by `edit(dict)` (content hash left stale)."""
    table, body = _split(data)
    header = json.loads(table["__metadata__"]["flywheel"])
    edit(header)  # type: ignore[operator]
    table["__metadata__"]["flywheel"] = json.dumps(header)
    raw = json.dumps(table).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(body)


def test_header_describes_the_state(artifact: Artifact, tiny_gemma: Engine) -> None:
    h = artifact.header
    assert h.format_version == 1
    assert h.fingerprint_digest == tiny_gemma.fingerprint.digest
    assert h.token_count == 3 * TINY_SLIDING_WINDOW and h.position_start == 0 and h.prefill_chunk == 8
    kinds = [layer.kind for layer in h.layers]
    assert kinds == ["sliding", "sliding", "full", "sliding"]
    sliding = h.layers[0]
    assert sliding.seen_tokens == h.token_count and sliding.cached_tokens == TINY_SLIDING_WINDOW - 1
    assert len(h.logits_sha256) == 64 and h.meta == {"problem_id": "p1"}


def test_round_trip_through_disk_keeps_every_byte(artifact: Artifact, tmp_path: Path) -> None:
    path = artifact.write(tmp_path / "a.kv")
    again = read_artifact(path, expected_sha256=artifact.sha256)
    assert again.sha256 == artifact.sha256
    assert path.read_bytes() == artifact.to_bytes()
    for name, tensor in artifact.tensors.items():
        assert again.tensors[name].equal(tensor)


def test_same_state_gives_the_same_name(tiny_gemma: Engine, artifact: Artifact) -> None:
    ids = artifact.header.token_ids
    cache, last = tiny_gemma.prefill(ids, chunk=8)
    twin = capture(tiny_gemma, cache, ids, last, prefill_chunk=8, meta={"problem_id": "p1"})
    assert twin.sha256 == artifact.sha256 and twin.to_bytes() == artifact.to_bytes()


def test_flipped_tensor_byte_is_refused(artifact: Artifact) -> None:
    data = bytearray(artifact.to_bytes())
    data[-100] ^= 0x01
    with pytest.raises(ArtifactIntegrityError):
        parse_artifact(bytes(data))


def test_edited_header_field_is_refused(artifact: Artifact) -> None:
    data = _rewrite_header(artifact.to_bytes(), lambda h: h["layers"][0].update(seen_tokens=1))
    with pytest.raises(ArtifactIntegrityError):
        parse_artifact(data)


@pytest.mark.parametrize("cut", [0, 5, 100, -1, -4096])
def test_truncated_file_is_refused(artifact: Artifact, cut: int) -> None:
    data = artifact.to_bytes()
    with pytest.raises(ArtifactMalformedError):
        parse_artifact(data[:cut])


def test_not_an_artifact_is_refused() -> None:
    import torch
    from safetensors.torch import save

    with pytest.raises(ArtifactMalformedError):
        parse_artifact(save({"x": torch.zeros(2)}))
    with pytest.raises(ArtifactMalformedError):
        parse_artifact(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")


def test_unknown_format_version_is_refused(artifact: Artifact) -> None:
    data = _rewrite_header(artifact.to_bytes(), lambda h: h.update(format_version=99))
    with pytest.raises(ArtifactVersionError):
        parse_artifact(data)


def test_expected_name_must_match(artifact: Artifact) -> None:
    with pytest.raises(ArtifactIntegrityError):
        parse_artifact(artifact.to_bytes(), expected_sha256="0" * 64)


def test_other_weights_are_refused_and_nothing_is_grafted(artifact: Artifact, tmp_path: Path) -> None:
    other = Engine.load(str(build_tiny_model("gemma3", tmp_path / "other", seed=1)), progress=False)
    with pytest.raises(FingerprintMismatchError, match="weights_sha256"):
        graft(other, parse_artifact(artifact.to_bytes()))


def test_other_attention_implementation_is_refused(artifact: Artifact, tiny_dirs: dict[str, Path]) -> None:
    eager = Engine.load(str(tiny_dirs["gemma3"]), EngineSettings(attn_implementation="eager"), progress=False)
    with pytest.raises(FingerprintMismatchError, match="attn_implementation"):
        graft(eager, parse_artifact(artifact.to_bytes()))


def test_other_device_is_refused(artifact: Artifact, tiny_gemma: Engine) -> None:
    """A CUDA-made artifact on a CPU engine (the fingerprint field a GPU machine would write)."""
    from dataclasses import replace

    cuda_fp = replace(tiny_gemma.fingerprint, device_type="cuda", device_name="NVIDIA H200")
    ids = artifact.header.token_ids
    cache, last = tiny_gemma.prefill(ids, chunk=8)
    real_fp = tiny_gemma.fingerprint
    tiny_gemma.fingerprint = cuda_fp
    try:
        foreign = capture(tiny_gemma, cache, ids, last, prefill_chunk=8)
    finally:
        tiny_gemma.fingerprint = real_fp
    with pytest.raises(FingerprintMismatchError, match="device_type"):
        graft(tiny_gemma, parse_artifact(foreign.to_bytes()))


def test_llama_artifact_does_not_fit_gemma(tiny_llama: Engine, tiny_gemma: Engine) -> None:
    ids = corpus_ids(tiny_llama, 10)
    cache, last = tiny_llama.prefill(ids)
    with pytest.raises(FingerprintMismatchError):
        graft(tiny_gemma, parse_artifact(capture(tiny_llama, cache, ids, last).to_bytes()))
