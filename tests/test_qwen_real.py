"""Qwen2.5-Coder-0.5B-Instruct, the real model, asked in its own chat format: exact grafts (one
sequence and inside the batched schedule) and a recurrence answered from its graft."""

from __future__ import annotations

from pathlib import Path

import pytest

from flywheel.attempt import run_attempt
from flywheel.engine import Engine
from flywheel.kv import exactness
from flywheel.library import Library
from flywheel.problemsets import Problem
from flywheel.prompts import ChatFormat

pytestmark = pytest.mark.real_model

PROBLEM = Problem("gsm-like-1", "Mia buys 3 boxes of 12 pencils and gives away 7 pencils. How many pencils "
                                "does she have left?", reference="29")
SOLUTION = "3 boxes hold 3 * 12 = 36 pencils. After giving away 7 she has 36 - 7 = 29 pencils."


@pytest.fixture(scope="module")
def qwen() -> Engine:
    return Engine.load("qwen2.5-coder-0.5b")


def test_the_packaged_qwen_is_asked_in_its_own_chat_template(qwen: Engine) -> None:
    fmt = qwen.prompt_format
    assert isinstance(fmt, ChatFormat)
    assert fmt.scaffold.to_assistant == "<|im_end|>\n<|im_start|>assistant\n"
    assert fmt.scaffold.head.startswith("<|im_start|>system\n") and fmt.scaffold.head.endswith("<|im_start|>user\n")
    assert qwen.fingerprint.config_sha256 and qwen.model.config.model_type == "qwen2"
    ids = qwen.encode_prompt(fmt.attempt("What is 2+2?", "solve", grafted=False))
    # The template's head opens the prompt: no <|endoftext|> (the GGUF's BOS) before it.
    assert ids[0] != qwen.tokenizer.bos_token_id and qwen.tokenizer.decode(ids[:1]) == "<|im_start|>"


def test_grafts_are_byte_exact_on_qwen(qwen: Engine, tmp_path: Path) -> None:
    report = exactness.run(qwen, samples=4, prefix_tokens=[48, 600], workdir=tmp_path)
    assert report.ok and report.sha_equal == 4 and report.kl_max == 0.0


def test_grafts_are_byte_exact_inside_the_batched_schedule_on_qwen(qwen: Engine, tmp_path: Path) -> None:
    report = exactness.run_slots(qwen, samples=4, prefix_tokens=[48, 300], slots=4, workdir=tmp_path)
    assert report.ok


def test_a_recurrence_is_answered_from_its_chat_graft(qwen: Engine, tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib") as lib:
        dep = lib.deposit(qwen, PROBLEM, SOLUTION, "29")
        route = lib.route(qwen, PROBLEM.text)
        assert route.kind == "exact" and route.artifact_sha == dep.artifact_sha256
        result = run_attempt(qwen, lib, PROBLEM, route="exact", artifact_sha=route.artifact_sha, budget=32)
    answered = PROBLEM.check_output(result.text, result.mode, markers=result.markers)
    assert result.grafted_artifact_sha == dep.artifact_sha256 and result.mode == "answer"
    assert answered.verdict.equivalent, result.text
    assert result.decode_tokens <= 8 and result.stop_reason == "stop"
