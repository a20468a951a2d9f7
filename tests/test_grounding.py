"""Number-grounded decoding (flywheel/grounding.py, the decoder's re-picks): the rules, the steering, and
that a grounded slot's re-picks never change a neighbour's bits."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
import torch

from flywheel.decode import BatchDecoder, DecodeRequest, DecodeSchedule
from flywheel.engine import Engine, StopRule
from flywheel.grounding import CONSTANTS, allowed_numbers, permits
from flywheel.sampling import pick_tokens

PROBLEM = "Maya buys 4 erasers at 37 dollars each and 3 folders, paying with a 100-dollar bill."
ALLOWED = allowed_numbers(PROBLEM)


def _decoder(eng: Engine, slots: int) -> BatchDecoder:
    """A decoder whose schedule names the tool these tests use (a request outside it is refused)."""
    return BatchDecoder(eng, slots, schedule=DecodeSchedule.of_run(slots, eng.settings.dtype, calculator=False, grounding=True))


def test_the_operands_are_the_problems_numbers_its_words_and_the_constants() -> None:
    assert {"4", "37", "3", "100"} <= ALLOWED and CONSTANTS <= ALLOWED
    assert "1200" in allowed_numbers("It costs 1,200 dollars.") and "2.5" in allowed_numbers("It weighs 2.5 kg.")
    assert "40" in allowed_numbers("over forty days") and "12" in allowed_numbers("a dozen eggs")
    assert "38" not in ALLOWED


@pytest.mark.parametrize(("text", "token", "ok"), [
    ("The erasers cost 4 * ", "37", True),                # a problem number
    ("The erasers cost 4 * 3", "7", True),                # finishing it digit by digit
    ("The erasers cost 4 * 3", "8", False),               # 38 begins no allowed number
    ("The erasers cost 4 * 37 = ", "148", True),          # a result is free
    ("4 * 37 = 148. The change is 100 - ", "148", True),  # an earlier result is an operand now
    ("The change is 100 - ", "52", False),                # a number from nowhere (a sibling's)
    ("The cost is 3", " dollars", True),                  # 3 is allowed: it may end there
    ("The cost is 1", "5 dollars", False),                # 15 is not, even as it ends
    ("The cost is 1", "0", True),                         # 10 is (a constant), 100 too
    ("The weight is 2", ".", True),                       # an open decimal point: judged later
    ("So 4 * 37 = 148. 100 - 48 = 52.\nFinal answer: ", "52", True),    # the last result
    ("So 4 * 37 = 148. 100 - 48 = 52.\nFinal answer: ", "148", False),  # an earlier one is not the answer
    ("So 4 * 37 = 148. 100 - 48 = 52.\nFinal answer: 5", "2", True),
    ("Nothing computed.\nFinal answer: ", "37", True),    # no result: the operand rule
    ("Nothing computed.\nFinal answer: ", "38", False),
    ("The erasers cost", " a lot", True),                 # no number: nothing to judge
])
def test_the_rules(text: str, token: str, ok: bool) -> None:
    assert permits(ALLOWED, text, text + token) is ok


class _Prefers(Engine):
    """Greedy rows write `script`; at a position with alternatives ("[97]") they take the first one the
    row's logits still allow (the grounding re-pick masks refused tokens to -inf). Sampled rows sample."""

    script: list[str] = []

    def pick_tokens(self, logits: torch.Tensor, temperatures: Sequence[float],
                    generators: Sequence[torch.Generator | None], produced: Sequence[Sequence[int]]) -> list[int]:
        real = pick_tokens(logits, temperatures, generators)
        out = []
        for row, r, t, p in zip(logits, real, temperatures, produced, strict=True):
            if t > 0:
                out.append(r)
                continue
            if len(p) >= len(self.script):
                out.append(next(iter(self.eos_ids)))
                continue
            ids = [self.encode(c, bos=False)[0] for c in self.script[len(p)]]
            out.append(next((i for i in ids if row[i] > float("-inf")), ids[0]))
        return out


def _prefers(base: Engine, script: str) -> Engine:
    """`script` with alternatives in brackets: "4 * [97]" writes 9, or 7 when 9 is refused."""
    eng = _Prefers(base.model, base.tokenizer, base.fingerprint, base.settings)
    eng.script, i = [], 0
    while i < len(script):
        if script[i] == "[":
            end = script.index("]", i)
            eng.script.append(script[i + 1:end])
            i = end + 1
        else:
            eng.script.append(script[i])
            i += 1
    return eng


def _request(eng: Engine, tag: str, *, grounded: bool, temperature: float = 0.0,
             seed: int | None = None) -> DecodeRequest:
    cache, logits = eng.prefill(eng.encode(f"Problem: {PROBLEM}\nSolution:"))
    return DecodeRequest(cache, logits[-1], 60, stop=StopRule(newline=False), temperature=temperature, seed=seed,
                         tag=tag, keep_logits=True, grounding=ALLOWED if grounded else None)


# The "model" binds a sibling's 9 for the price, and ends on an earlier number as its final answer.
SLIPS = " 4 * 3[97] = 148. 100 - 148 = -48. Final answer: [14][48]"


def test_a_grounded_slot_writes_the_problems_number_and_its_last_result(tiny_gemma: Engine) -> None:
    eng = _prefers(tiny_gemma, SLIPS)
    decoder = _decoder(eng, 2)
    on = next(iter(decoder.run([_request(eng, "me", grounded=True)])))
    off = next(iter(_decoder(eng, 2).run([_request(eng, "me", grounded=False)])))
    assert eng.decode_text(off.tokens) == " 4 * 39 = 148. 100 - 148 = -48. Final answer: 14"
    assert eng.decode_text(on.tokens) == " 4 * 37 = 148. 100 - 148 = -48. Final answer: 48"
    assert decoder.grounding_repicks == 3 and on.tool_tokens == 0   # re-picked, not forced


def test_re_picks_never_change_a_neighbours_bits_nor_depend_on_them(tiny_gemma: Engine) -> None:
    eng = _prefers(tiny_gemma, SLIPS)

    def run(*, grounded: bool, neighbour: bool) -> dict[str, list[str]]:
        reqs = [_request(eng, "n", grounded=False, temperature=0.9, seed=11)] if neighbour else []
        if grounded:
            reqs.insert(0, _request(eng, "g", grounded=True))
        outs = _decoder(eng, 3).run(reqs)
        return {o.tag: [hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in o.step_logits] + [str(o.tokens)]
                for o in outs}

    both = run(grounded=True, neighbour=True)
    assert both["n"] == run(grounded=False, neighbour=True)["n"]
    assert both["g"] == run(grounded=True, neighbour=False)["g"]


def test_a_sampled_grounded_slot_draws_the_same_tokens_alone_and_beside_others(tiny_gemma: Engine) -> None:
    """Sampled re-picks draw again from the slot's own generator: the same seed, the same tokens."""
    def tokens(neighbours: int) -> list[int]:
        reqs = [_request(tiny_gemma, "g", grounded=True, temperature=1.0, seed=1)]
        reqs += [_request(tiny_gemma, f"n{k}", grounded=False, temperature=1.0, seed=k) for k in range(neighbours)]
        decoder = _decoder(tiny_gemma, 4)
        out = {o.tag: o.tokens for o in decoder.run(reqs)}["g"]
        assert decoder.grounding_repicks >= 1   # seed 1 draws a number the rules refuse: a re-draw happened
        return out

    assert tokens(0) == tokens(3)
