"""The batched step's oneDNN linears are row-invariant on every linear shape of both Qwen2.5-Coder models.

Slot invariance rests on it: a row's bits must not depend on how many rows share the matmul or where
the row sits. It was measured on Gemma 3's shapes; kernels are picked by shape, so each Qwen shape
(q/k/v with biases, 2 key-value heads, the MLP, the untied 151,936-row output projection) is checked
here on the decoder's own path (`flywheel.decode._linear_forward` inside a step), not assumed.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator

import pytest
import torch

from flywheel import decode, modelzoo

#: (hidden, intermediate, query width, key-value width, vocab) of each model (DESIGN.md, the GGUF headers).
SHAPES = {
    "qwen2.5-coder-0.5b": (896, 4864, 14 * 64, 2 * 64, 151_936),
    "qwen2.5-coder-1.5b": (1536, 8960, 12 * 128, 2 * 128, 151_936),
}


def linear_shapes(hidden: int, inter: int, q: int, kv: int, vocab: int) -> list[tuple[int, int, bool]]:
    """(in, out, bias) of every distinct linear of a qwen2 layer stack and its head."""
    return [(hidden, q, True), (hidden, kv, True), (q, hidden, False), (hidden, inter, False),
            (inter, hidden, False), (hidden, vocab, False)]


@pytest.fixture
def in_step() -> Iterator[None]:
    """The decoder's step flag for this thread (what `_slot_step` sets), cleared afterwards."""
    decode._in_step.active = True
    try:
        yield
    finally:
        decode._in_step.active = False


def step_linear(fan_in: int, fan_out: int, bias: bool) -> torch.nn.Linear:
    torch.manual_seed(fan_in * 7 + fan_out)
    lin = torch.nn.Linear(fan_in, fan_out, bias=bias)
    lin.requires_grad_(False)
    lin._flywheel_onednn_weight = lin.weight.detach().to_mkldnn()  # type: ignore[assignment]
    lin._flywheel_onednn_bias = None if lin.bias is None else lin.bias.detach().to_mkldnn()  # type: ignore[assignment]
    lin.forward = types.MethodType(decode._linear_forward, lin)  # type: ignore[method-assign]  # as the decoder does
    return lin


def test_the_shape_table_is_the_prepared_models() -> None:
    """The 0.5B's table row is what its prepared config says (prepared by `make test` before the suite)."""
    cfg = json.loads((modelzoo.prepare("qwen2.5-coder-0.5b", progress=False) / "config.json").read_text())
    heads, kv_heads, hidden = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    head_dim = hidden // heads
    assert (hidden, cfg["intermediate_size"], heads * head_dim, kv_heads * head_dim, cfg["vocab_size"]) == \
        SHAPES["qwen2.5-coder-0.5b"]
    assert cfg["model_type"] == "qwen2" and cfg["num_hidden_layers"] == 24 and not cfg["tie_word_embeddings"]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_every_linear_shape_gives_a_row_the_same_bits_whatever_rows_share_it(model: str, in_step: None) -> None:
    torch.manual_seed(0)
    for fan_in, fan_out, bias in linear_shapes(*SHAPES[model]):
        lin = step_linear(fan_in, fan_out, bias)
        rows = torch.randn(17, fan_in)
        with torch.inference_mode():
            reference = lin(rows[:2])                  # the step keeps every matmul on >= 2 rows
            for m in (3, 5, 8, 16, 17):
                out = lin(rows[:m])
                assert torch.equal(out[:2], reference), (model, fan_in, fan_out, m)
            moved = lin(torch.cat([rows[5:9], rows[:2]]))   # the same rows at other places
            assert torch.equal(moved[4:6], reference), (model, fan_in, fan_out, "moved")
        del lin
