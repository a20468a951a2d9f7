"""Graft exactness: restored state continues byte for byte like the live cache, across windows."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from flywheel.decode import DecodeRequest, Prompt, decode_alone
from flywheel.engine import Engine, StopRule
from flywheel.kv import Artifact, capture, graft, logits_sha256, parse_artifact
from flywheel.kv.exactness import corpus_ids
from flywheel.testing import TINY_SLIDING_WINDOW

CONT = 6


def naive_restore(engine: Engine, artifact: Artifact) -> DynamicCache:
    """The per-layer `update()` restore other tools use: what `graft` is measured against here."""
    cache = engine.new_cache()
    for i in range(len(artifact.header.layers)):
        cache.update(artifact.tensors[f"layer.{i}.keys"], artifact.tensors[f"layer.{i}.values"], i)
    return cache


def _fresh_and_grafted(engine: Engine, n: int, chunk: int = 8) -> tuple[torch.Tensor, torch.Tensor, bytes]:
    ids = corpus_ids(engine, n + CONT)
    prefix, cont = ids[:n], ids[n:n + CONT]
    cache, last = engine.prefill(prefix, chunk=chunk)
    data = capture(engine, cache, prefix, last, prefill_chunk=chunk).to_bytes()
    fresh = engine.forward(cont, cache, keep=CONT)
    restored = graft(engine, parse_artifact(data))
    return fresh, engine.forward(cont, restored.cache, keep=CONT), data


@pytest.mark.parametrize("kind", ["tiny_gemma", "tiny_llama", "tiny_qwen"])
@pytest.mark.parametrize("n", [3, TINY_SLIDING_WINDOW - 1, TINY_SLIDING_WINDOW, TINY_SLIDING_WINDOW + 1, 5 * TINY_SLIDING_WINDOW + 3])
def test_graft_logits_are_byte_identical_to_fresh(kind: str, n: int, request: pytest.FixtureRequest) -> None:
    engine = request.getfixturevalue(kind)
    fresh, grafted, _ = _fresh_and_grafted(engine, n)
    assert logits_sha256(fresh) == logits_sha256(grafted)
    assert torch.equal(fresh, grafted)


def test_naive_update_restore_is_wrong_past_the_sliding_window(tiny_gemma: Engine) -> None:
    """Why sliding layers persist their token count: keys/values alone go wrong past the window."""
    n = 4 * TINY_SLIDING_WINDOW
    ids = corpus_ids(tiny_gemma, n + CONT)
    cache, last = tiny_gemma.prefill(ids[:n], chunk=8)
    artifact = parse_artifact(capture(tiny_gemma, cache, ids[:n], last, prefill_chunk=8).to_bytes())
    fresh = tiny_gemma.forward(ids[n:n + CONT], cache, keep=CONT)
    naive = tiny_gemma.forward(ids[n:n + CONT], naive_restore(tiny_gemma, artifact), keep=CONT)
    assert not torch.equal(fresh, naive)
    assert (fresh - naive).abs().max() > 1e-3


def test_naive_restore_is_still_exact_within_the_window(tiny_gemma: Engine) -> None:
    """Control for the test above: the difference really comes from crossing the window."""
    n = TINY_SLIDING_WINDOW // 2
    ids = corpus_ids(tiny_gemma, n + CONT)
    cache, last = tiny_gemma.prefill(ids[:n], chunk=8)
    artifact = parse_artifact(capture(tiny_gemma, cache, ids[:n], last, prefill_chunk=8).to_bytes())
    fresh = tiny_gemma.forward(ids[n:n + CONT], cache, keep=CONT)
    naive = tiny_gemma.forward(ids[n:n + CONT], naive_restore(tiny_gemma, artifact), keep=CONT)
    assert torch.equal(fresh, naive)


def test_greedy_decoding_after_graft_matches_fresh_decoding(tiny_gemma: Engine) -> None:
    n = 3 * TINY_SLIDING_WINDOW
    ids = corpus_ids(tiny_gemma, n)
    cache, last = tiny_gemma.prefill(ids, chunk=8)
    data = capture(tiny_gemma, cache, ids, last, prefill_chunk=8).to_bytes()
    first = int(last[-1].argmax())   # the artifact keeps no logits: both continue from the same next token

    def continued(source: object) -> list[int]:
        request = DecodeRequest(None, None, 19, stop=StopRule(newline=False), prompt=Prompt(source, [first]))  # type: ignore[arg-type]
        return decode_alone(tiny_gemma, request).tokens

    fresh_tokens = continued(cache)
    graft_tokens = continued(graft(tiny_gemma, parse_artifact(data)).cache)
    assert len(fresh_tokens) > 1 and graft_tokens == fresh_tokens


def test_shifted_graft_is_close_but_not_exact(tiny_gemma: Engine) -> None:
    """RoPE re-rotation to another position: mathematically equal, numerically not byte-equal."""
    n = 2 * TINY_SLIDING_WINDOW
    ids = corpus_ids(tiny_gemma, n + CONT)
    cache, last = tiny_gemma.prefill(ids[:n], chunk=8)
    artifact = parse_artifact(capture(tiny_gemma, cache, ids[:n], last, prefill_chunk=8).to_bytes())
    fresh = tiny_gemma.forward(ids[n:n + CONT], cache, keep=CONT)
    shifted = graft(tiny_gemma, artifact, offset=37)
    moved = tiny_gemma.forward(ids[n:n + CONT], shifted.cache, keep=CONT, position_offset=37)
    diff = (fresh - moved).abs().max().item()
    assert 0 < diff < 1e-2
    assert torch.equal(fresh.argmax(-1), moved.argmax(-1))


def test_logits_sha_in_header_matches_a_fresh_prefill(tiny_llama: Engine) -> None:
    ids = corpus_ids(tiny_llama, 40)
    cache, last = tiny_llama.prefill(ids, chunk=8)
    artifact = capture(tiny_llama, cache, ids, last, prefill_chunk=8)
    _, again = tiny_llama.prefill(ids, chunk=8)
    assert artifact.header.logits_sha256 == logits_sha256(again.reshape(-1))
