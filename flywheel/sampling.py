"""Picking the next token of B sequences at once: greedy argmax, or an exact seeded sample.

One row-wise max over the (B, vocab) logits serves every row: it is each greedy row's token and
each sampled row's reference point. A sampled row then draws by a two-level inverse CDF with one
float64 uniform from its own seeded generator: weights w = exp((logit - max) / T) over the whole
vocabulary (float32, as a float32 softmax would have them), sums of blocks of `BLOCK` tokens, a
float64 running sum over the blocks to find the block, and one within it to find the token. The
distribution is the full softmax at temperature T (nothing is truncated), for about four passes
over the row instead of softmax + multinomial's eight.

Why a row's token depends only on its own logits and generator: a max is exact in any order, and
every later operation runs on that row alone, with the same shapes whatever the batch holds (an
elementwise op over several rows at once could split its work at other element offsets and give
a few elements other bits). So a slot samples the same tokens alone or beside any neighbours
(tests/test_sampling.py). The previous sampler (`torch.softmax` + `torch.multinomial` per row)
drew other tokens from the same seed, so the sampler is part of a run's decode schedule
(`SAMPLER`): a run is never resumed under another.

    >>> pick_tokens(torch.tensor([[0.0, 2.0, 1.0]]), [0.0], [None])
    [1]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: Names the sampling arithmetic; bump it when a seed could draw another token.
SAMPLER = "sampler-v2:rowmax+block-inverse-cdf"
#: Tokens per block of the two-level inverse CDF (the vocabulary is padded up to a multiple).
BLOCK = 1024


def pick_tokens(logits: torch.Tensor, temperatures: Sequence[float],
                generators: Sequence[torch.Generator | None]) -> list[int]:
    """The next token of each row of `logits` (B, vocab): argmax where its temperature is <= 0, else a sample.

    Args:
        logits: (B, vocab) float logits, one row per sequence.
        temperatures: one per row; <= 0 is greedy.
        generators: one per row; a sampled row draws one uniform from it per call (None: the
            global generator, not reproducible).
    Returns:
        B token ids.
    """
    if logits.dim() != 2 or len(temperatures) != logits.shape[0] or len(generators) != logits.shape[0]:
        raise ValueError(f"pick_tokens: logits {tuple(logits.shape)} vs {len(temperatures)} temperatures, "
                         f"{len(generators)} generators")
    top, argmax = torch.max(logits, dim=1)            # (B,), (B,): exact, and first index on ties
    picked = argmax.tolist()
    for i, temperature in enumerate(temperatures):
        if temperature > 0:
            picked[i] = _sample_row(logits[i], float(top[i]), float(temperature), generators[i])
    return [int(t) for t in picked]


def _sample_row(row: torch.Tensor, top: float, temperature: float, generator: torch.Generator | None) -> int:
    """Draw a token of `row` (vocab,) with weight exp((logit - top) / T): block sums, then within the block."""
    vocab = row.shape[0]
    weights = torch.zeros(-(-vocab // BLOCK) * BLOCK, dtype=torch.float32)   # padding weighs nothing
    torch.exp(torch.sub(row.float(), top).div_(temperature), out=weights[:vocab])
    blocks = weights.view(-1, BLOCK).sum(dim=1, dtype=torch.float64).cumsum(0)    # (vocab / BLOCK,)
    u = torch.rand((), generator=generator, dtype=torch.float64) * blocks[-1]
    if not bool(torch.isfinite(u)):   # a NaN or infinite row has no distribution to draw from
        return int(torch.argmax(row))
    b = min(int(torch.searchsorted(blocks, u, right=True)), len(blocks) - 1)
    before = blocks[b - 1] if b > 0 else torch.zeros((), dtype=torch.float64)
    block = weights[b * BLOCK:(b + 1) * BLOCK]
    within = block.double().cumsum(0) + before
    at = int(torch.searchsorted(within, u, right=True))
    if at >= BLOCK:   # u fell past the block's own running sum by a rounding: its last weighted token
        at = int(block.nonzero()[-1])
    return b * BLOCK + at
