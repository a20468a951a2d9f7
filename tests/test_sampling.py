"""The batched sampler (flywheel/sampling.py): exact distribution, and a row's token is its own."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from flywheel.decode import BatchDecoder, DecodeRequest
from flywheel.engine import Engine, StopRule
from flywheel.sampling import BLOCK, pick_tokens


def gens(*seeds: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


def test_greedy_rows_take_the_first_maximum() -> None:
    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0], [5.0, -1.0, 5.0, 0.0]])
    assert pick_tokens(logits, [0.0, -1.0], [None, None]) == [1, 0]


def test_a_rows_sample_does_not_depend_on_its_neighbours_or_its_index() -> None:
    torch.manual_seed(0)
    vocab = 3 * BLOCK + 17                         # a partial last block too
    me = torch.randn(vocab) * 4

    def draws(rows: list[torch.Tensor], at: int, temps: list[float]) -> list[int]:
        g = gens(*range(len(rows)))
        g[at] = torch.Generator().manual_seed(42)
        out = []
        for _ in range(30):
            out.append(pick_tokens(torch.stack(rows), temps, g)[at])
        return out

    alone = draws([me], 0, [0.7])
    neighbours = [torch.randn(vocab) * 9, torch.full((vocab,), float("nan")), torch.randn(vocab)]
    assert draws([neighbours[0], me], 1, [1.3, 0.7]) == alone
    assert draws([*neighbours, me], 3, [0.9, 0.5, 0.0, 0.7]) == alone
    assert draws([me, *neighbours], 0, [0.7, 0.0, 2.0, 0.1]) == alone
    assert len(set(alone)) > 1                      # it really samples


def test_the_draws_follow_the_softmax_at_the_temperature() -> None:
    """Chi-square against softmax(logits / T) over 20,000 draws spread across blocks (fails if biased)."""
    vocab = 4 * BLOCK
    logits = torch.full((vocab,), -1e4)
    support = [3, BLOCK - 1, BLOCK, 2 * BLOCK + 5, vocab - 1]   # block edges included
    values = [0.0, 1.0, 2.0, 0.5, 1.5]
    for t, v in zip(support, values, strict=True):
        logits[t] = v
    temperature, n = 0.8, 20_000
    g = gens(7)
    counts = dict.fromkeys(support, 0)
    for _ in range(n):
        token = pick_tokens(logits[None], [temperature], g)[0]
        assert token in counts                   # nothing outside the support is ever drawn
        counts[token] += 1
    weights = [math.exp(v / temperature) for v in values]
    expected = [n * w / sum(weights) for w in weights]
    chi2 = sum((counts[t] - e) ** 2 / e for t, e in zip(support, expected, strict=True))
    assert chi2 < 18.5   # 4 degrees of freedom: p = 0.001


def test_a_nan_row_gives_a_token_not_a_crash() -> None:
    row = torch.full((1, 2 * BLOCK), float("nan"))
    assert 0 <= pick_tokens(row, [0.7], gens(1))[0] < 2 * BLOCK


def test_mismatched_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="temperatures"):
        pick_tokens(torch.zeros(2, 5), [0.0], [None, None])


def test_sampled_slots_over_long_unequal_grafted_contexts_are_slot_invariant(tiny_gemma: Engine) -> None:
    """Sampled decoding beside neighbours of other, longer contexts, at several slot counts: same tokens, same bits."""
    from flywheel.testing import TINY_SLIDING_WINDOW

    def req(n_tokens: int, tag: str, seed: int, budget: int = 20) -> DecodeRequest:
        ids = tiny_gemma.encode("The sum of the parts is twelve. " * 40)[:n_tokens]
        cache, logits = tiny_gemma.prefill(ids)
        return DecodeRequest(cache, logits[-1], budget, stop=StopRule(newline=False), temperature=0.8, seed=seed,
                             tag=tag, keep_logits=True)

    me_len = 5 * TINY_SLIDING_WINDOW + 3
    runs = []
    for slots, others in ((1, []), (3, [(9 * TINY_SLIDING_WINDOW, 11), (2 * TINY_SLIDING_WINDOW, 7)]),
                          (6, [(n, 30) for n in (4, 70, 130, 17, 200)])):
        reqs = [req(n, f"n{i}", seed=100 + i, budget=b) for i, (n, b) in enumerate(others)] + [req(me_len, "me", 5)]
        out = {o.tag: o for o in BatchDecoder(tiny_gemma, slots).run(reqs)}["me"]
        runs.append((out.tokens, [hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in out.step_logits]))
    assert all(r == runs[0] for r in runs)
