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


@pytest.mark.parametrize("version", calculator.VERSIONS)
def test_the_result_of_a_trailing_expression_is_exact(text: str, forced: str, version: str) -> None:
    assert calculator.complete(text, version) == forced


# What the Qwen2.5-Coder models write (read from the 1.5B cold run's attempts: 64% of their arithmetic
# before `=` is LaTeX, which calc-v1 left to the model).
@pytest.mark.parametrize(("text", "forced"), [
    (r"\[ 17 \times 60 =", " 1020"),
    (r"is \(120 \times 0.5 =", " 60"),
    (r"\frac{1}{5} \times 325 =", " 65"),
    (r"\[ \left( \frac{6}{30} \right) \times 100 =", " 20"),
    (r"\frac{\frac{1}{2}}{4} =", " 0.125"),                       # nested
    (r"99 \div 33 \times 70 =", " 210"),                          # left to right, as plain
    (r"2 \cdot 3 + 1 = ", "7"),
    (r"0.03 \times 970,000 =", " 29100"),
    (r"970{,}000 \div 10 =", " 97000"),
    (r"\$4 \times 5 - \$4 \times (5/16) =", " 18.75"),
    (r"5 \text{ eggs/day} \times 88 \text{ days} =", " 440"),     # units in a product
    (r"\text{Money left} = 9 \times 10 - 87 =", " 3"),
    (r"P = 2 \times (6 + 102) =", " 216"),                         # v1 read only `(6 + 102)`
])
def test_calc_v2_reads_the_latex_the_chat_models_write(text: str, forced: str) -> None:
    assert calculator.complete(text, "calc-v2") == forced
    assert calculator.complete(text, "calc-v1") != forced   # what v1 left to the model, or read wrong


@pytest.mark.parametrize("text", [
    r"1 \text{ hour} + 30 \text{ minutes} =",    # units in a sum: not 31
    r"x \times 2 + 3 =",                          # the tail of a larger expression: not 5
    "x * 2 + 3 =",
    "3 4 + 5 =",
    r"\sqrt{16} \times 2 =",                     # a command it does not compute
    r"2^{3} + 1 =",
    r"20\% \times 50 =",
    "3 + 4 =\n",                                  # the line is over
    r"\frac{1}{0} + 1 =",
])
def test_calc_v2_leaves_what_it_cannot_read_to_the_model(text: str) -> None:
    assert calculator.complete(text, "calc-v2") is None


def test_a_calculator_version_is_named_or_refused(tiny_gemma: Engine) -> None:
    assert calculator.CALCULATOR == calculator.VERSIONS[-1] == "calc-v2"
    with pytest.raises(ValueError, match="calc-v9"):
        calculator.complete("1 + 1 =", "calc-v9")
    with pytest.raises(ValueError, match="calc-v9"):
        DecodeSchedule.of_run(1, tiny_gemma.settings.dtype, calculator="calc-v9", grounding=False)
    old = DecodeSchedule.of_run(1, tiny_gemma.settings.dtype, calculator="calc-v1", grounding=False)
    assert old.calculator == "calc-v1"
    assert DecodeSchedule.of_run(1, tiny_gemma.settings.dtype, calculator=True, grounding=False).calculator == "calc-v2"


def test_the_decoder_runs_the_schedules_version(tiny_gemma: Engine) -> None:
    eng = _scripted(tiny_gemma, r"\[ 12 \times 3 = 38 \]")   # the "model" slips: 38
    outs = {}
    for version in calculator.VERSIONS:
        dec = BatchDecoder(eng, 1, schedule=DecodeSchedule.of_run(1, eng.settings.dtype, calculator=version,
                                                                grounding=False))
        outs[version] = next(iter(dec.run([_request(eng, "me", calc=True)])))
    assert eng.decode_text(outs["calc-v1"].tokens) == r"\[ 12 \times 3 = 38 \]" and outs["calc-v1"].tool_tokens == 0
    assert eng.decode_text(outs["calc-v2"].tokens) == r"\[ 12 \times 3 = 36 \]"


def test_false_steps_keep_v1s_reading() -> None:
    """It decides which of the model's own solutions deposit: a newer decode-time reader must not change it
    (a cold library re-run would deposit other artifacts)."""
    assert calculator.false_steps(r"\[ 17 \times 60 = 1000 \]. Then 2 + 2 = 5") == ["2 + 2 = 5"]


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
