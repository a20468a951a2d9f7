"""Exact arithmetic in the decode schedule (flywheel/calculator.py, the decoder's forced tokens)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
import torch

from flywheel import calculator
from flywheel.decode import BatchDecoder, DecodeRequest, DecodeSchedule
from flywheel.engine import Engine, StopRule
from flywheel.sampling import pick_tokens


def _decoder(eng: Engine, slots: int) -> BatchDecoder:
    """A decoder whose schedule names the tool these tests use (a request outside it is refused)."""
    return BatchDecoder(eng, slots, schedule=DecodeSchedule.of_run(slots, eng.settings.dtype, calculator=True, grounding=False))


@pytest.mark.parametrize(("text", "forced"), [
    ("Together that is 42 + 16 =", " 58"),
    ("The change is 100 - 42 = ", "58"),                 # the model's own space is kept
    ("Each gets 7 / 2 =", " 3.5"),
    ("so 1/3 + 1/6 =", " 0.5"),                          # exact rationals, not floats
    ("0.1 + 0.2 =", " 0.3"),
    ("2 / 3 =", " 2/3"),                                 # not a terminating short decimal
    ("(3 + 4) × 2 =", " 14"),
    ("12 ÷ 4 · 5 =", " 15"),                             # left to right
    ("2 + 3 * 4 =", " 14"),                              # precedence
    ("-4 * -2 =", " 8"),
    ("1,250 + 750 =", " 2000"),
    ("She had 12. Then 12 - 5 =", " 7"),                 # the sentence before is not part of it
    ("<<6*7=", "42"),                                    # GSM8K's annotation
    ("The answer is 12.\n\n3 + 4 =", " 7"),
])


def test_the_result_of_a_trailing_expression_is_exact(text: str, forced: str) -> None:
    assert calculator.complete(text) == forced


@pytest.mark.parametrize("text", [
    "x =",                       # no expression
    "so x = 5 and y =",          # a variable, not arithmetic
    "= 12 =",                    # one number, no operator
    "5 / 0 =",                   # division by zero: an outcome, nothing is fed
    "7 / (3 - 3) =",
    "2 * (3 + (4 =",             # unbalanced
    "99999999999999999999 * 99999999999999999999 =",      # past the digit bound
    "1" * 30 + " + 1 =",         # a number past the digit bound
    "((((((((((1+1))))))))) + 1 =",                       # nested past the bound
    "2 ** 3 =",                  # no powers (no towers of exponents)
    "__import__('os') + 1 =",
    "3 + 4 = 7",                 # already answered
    "3 + 4",                     # no '='
    "20% of 50 =",
])
def test_anything_else_is_left_to_the_model(text: str) -> None:
    assert calculator.complete(text) is None


class _Scripted(Engine):
    """Greedy rows emit `script` (indexed by how much the row has produced); sampled rows sample."""

    script = ""

    def pick_tokens(self, logits: torch.Tensor, temperatures: Sequence[float],
                    generators: Sequence[torch.Generator | None], produced: Sequence[Sequence[int]]) -> list[int]:
        real = pick_tokens(logits, temperatures, generators)
        ids = self.encode(self.script, bos=False)
        eos = next(iter(self.eos_ids))
        return [r if t > 0 else (ids[len(p)] if len(p) < len(ids) else eos)
                for r, t, p in zip(real, temperatures, produced, strict=True)]


def _scripted(base: Engine, script: str) -> Engine:
    eng = _Scripted(base.model, base.tokenizer, base.fingerprint, base.settings)
    eng.script = script
    return eng


def _request(eng: Engine, tag: str, *, calc: bool, temperature: float = 0.0, seed: int | None = None) -> DecodeRequest:
    cache, logits = eng.prefill(eng.encode("Problem: add them.\nSolution:"))
    return DecodeRequest(cache, logits[-1], 40, stop=StopRule(newline=False), temperature=temperature, seed=seed,
                         tag=tag, keep_logits=True, calculator=calc)


def test_the_decoder_feeds_the_result_and_counts_it_apart(tiny_gemma: Engine) -> None:
    eng = _scripted(tiny_gemma, "Sum: 2 + 3 = 7 apples")   # the "model" slips: 7
    with_tool = {o.tag: o for o in _decoder(eng, 2).run([_request(eng, "me", calc=True)])}["me"]
    without = {o.tag: o for o in _decoder(eng, 2).run([_request(eng, "me", calc=False)])}["me"]
    assert eng.decode_text(without.tokens) == "Sum: 2 + 3 = 7 apples" and without.tool_tokens == 0
    assert eng.decode_text(with_tool.tokens) == "Sum: 2 + 3 = 5 apples"
    assert with_tool.tool_tokens == len(eng.encode(" 5", bos=False))


def test_forced_tokens_never_change_a_neighbours_bits(tiny_gemma: Engine) -> None:
    eng = _scripted(tiny_gemma, "Sum: 2 + 3 = 7 and 10 - 4 = 1 and 6 * 7 = 4")

    def neighbour_shas(*, beside_tool: bool) -> list[str]:
        reqs = [_request(eng, "n", calc=False, temperature=0.9, seed=11)]
        if beside_tool:
            reqs.insert(0, _request(eng, "tool", calc=True))
        outs = {o.tag: o for o in _decoder(eng, 3).run(reqs)}
        if beside_tool:
            assert outs["tool"].tool_tokens > 0
        return [hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in outs["n"].step_logits] + \
            [str(outs["n"].tokens)]

    assert neighbour_shas(beside_tool=True) == neighbour_shas(beside_tool=False)


def test_forced_tokens_stay_inside_the_budget(tiny_gemma: Engine) -> None:
    eng = _scripted(tiny_gemma, "123 + 456 =")
    cache, logits = eng.prefill(eng.encode("Q:"))
    req = DecodeRequest(cache, logits[-1], len("123 + 456 =") + 2, stop=StopRule(newline=False), tag="me",
                        calculator=True)
    out = next(iter(_decoder(eng, 2).run([req])))
    assert len(out.tokens) == req.budget and out.stop_reason == "budget"
    assert eng.decode_text(out.tokens) == "123 + 456 = 5" and out.tool_tokens == 2


@pytest.mark.parametrize(("text", "false"), [
    ("20/24 = 2 batches. One batch uses 2 + 2 = 4 cups.", ["20/24 = 2"]),   # a self-deposit the study made
    ("x = 3 + 4 = 8 cm", ["3 + 4 = 8"]),
    ("Noah is 15 - 5 = 10 years old. 1,200 + 800 = 2,000 dollars.", []),
    ("7 / 2 = 3.5 and 2 / 3 = 0.67", []),                  # a decimal rounded at its own places
    ("(139+178)*2=317*2=634.", []),                         # the right side goes on: not a stated result
    ("we have 8x^2+1=73 and f_9+2f_8+2=55", []),            # the left side is part of a larger term
    ("a_n<sqrt(6+3)=3", []),
])
def test_false_steps_are_the_stated_results_that_are_wrong(text: str, false: list[str]) -> None:
    assert calculator.false_steps(text) == false


def test_no_curated_solution_has_a_false_step() -> None:
    """The deposit rule refuses no right working: every curated family and CHAMP solution passes it."""
    from flywheel.problemsets import load_champ, load_problem_set

    solutions = [p.solution for split in ("train", "heldout")
                 for p in load_problem_set(f"gen:all?n=30&seed=5&split={split}").problems]
    solutions += [p.solution for p in load_champ()]
    assert len(solutions) > 800 and not [s for s in solutions if s and calculator.false_steps(s)]
