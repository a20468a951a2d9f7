"""`flywheel.attempt` directly: the solve stop rule, why an attempt stopped, and the answer its text
states (found by the verifier's worker, with the verdict)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from flywheel.attempt import SolveStop, run_attempt
from flywheel.engine import Engine
from flywheel.problemsets import Problem
from flywheel.prompts import plain_prompt

PROBLEM = Problem(id="lin-a", text="Solve for x: 3x + 8 = 35.", reference="9")


@pytest.mark.parametrize(("text", "stops"), [
    ("x = 9.\nFinal answer: 9\n", True),
    ("Final answer: 9", False),                      # the line is not complete yet
    ("x = 9.\nFinal answer:", False),
    ("x = 9.\n\nProblem: Solve", True),              # the model started a new problem
    ("Subtract 8.\nDivide by 3.\n", False),          # newlines alone do not stop a solution
    ("a" * 200 + "\nFinal answer: 9\n", True),       # only the recent tail is decoded
])
def test_solve_stop_waits_for_a_complete_final_answer_line(tiny_gemma: Engine, text: str, stops: bool) -> None:
    produced = tiny_gemma.encode(text, bos=False)
    assert SolveStop().should_stop(tiny_gemma, produced) is stops


class _Scripted(Engine):
    """The tiny model, except that decoding emits `script` and then EOS."""

    script = ""

    def pick_tokens(self, logits: torch.Tensor, temperatures: Sequence[float],
                    generators: Sequence[torch.Generator | None], produced: Sequence[Sequence[int]]) -> list[int]:
        ids = self.encode(self.script, bos=False)
        return [ids[len(p)] if len(p) < len(ids) else next(iter(self.eos_ids)) for p in produced]


def scripted(base: Engine, script: str) -> Engine:
    eng = _Scripted(base.model, base.tokenizer, base.fingerprint, base.settings)
    eng.script = script
    return eng


def test_an_attempt_stopped_by_its_final_answer_line_is_not_exhausted(tiny_gemma: Engine) -> None:
    eng = scripted(tiny_gemma, "x = 9.\nFinal answer: 9\nmore")
    r = run_attempt(eng, None, PROBLEM, route="none", artifact_sha=None, budget=64)
    assert r.stop_reason == "stop" and not r.budget_exhausted
    assert r.text == "x = 9.\nFinal answer: 9\n" and r.mode == "solve"
    answered = PROBLEM.check_output(r.text, r.mode)
    assert answered.answer == "9" and answered.verdict.equivalent
    assert r.decode_tokens == len(eng.encode(r.text, bos=False)) < r.budget


def test_an_attempt_cut_by_its_budget_is_exhausted_and_has_no_answer(tiny_gemma: Engine) -> None:
    eng = scripted(tiny_gemma, "x = 9.\nFinal answer: 9\n")
    r = run_attempt(eng, None, PROBLEM, route="none", artifact_sha=None, budget=6)
    assert r.stop_reason == "budget" and r.budget_exhausted
    assert r.decode_tokens == r.budget == 6 and r.text == "x = 9."   # byte tokens: one per character
    assert PROBLEM.check_output(r.text, r.mode).answer is None


def test_an_attempt_ended_by_eos_is_not_exhausted(tiny_gemma: Engine) -> None:
    r = run_attempt(scripted(tiny_gemma, ""), None, PROBLEM, route="none", artifact_sha=None, budget=8)
    assert r.stop_reason == "eos" and not r.budget_exhausted
    assert r.decode_tokens == 1 and PROBLEM.check_output(r.text, r.mode).answer is None


def test_a_zero_budget_is_exhausted_without_running_the_model(tiny_gemma: Engine) -> None:
    r = run_attempt(tiny_gemma, None, PROBLEM, route="none", artifact_sha=None, budget=0)
    assert r.budget_exhausted and r.stop_reason == "budget"
    assert (r.prefill_tokens, r.decode_tokens, r.restored_tokens) == (0, 0, 0)
    assert r.text == "" and PROBLEM.check_output(r.text, r.mode).answer is None and r.logits_sha256 is None


def test_an_ungrafted_attempt_accounts_for_every_token(tiny_gemma: Engine) -> None:
    r = run_attempt(tiny_gemma, None, PROBLEM, route="none", artifact_sha=None, budget=6)
    assert r.grafted_artifact_sha is None and r.restored_tokens == 0 and r.refused == []
    assert r.prefill_tokens == len(tiny_gemma.encode(plain_prompt(PROBLEM.text, "solve")))
    assert 1 <= r.decode_tokens <= 6
    assert r.budget_exhausted == (r.stop_reason == "budget")
    assert r.logits_sha256 is not None and r.seed is None   # greedy: no seed recorded
