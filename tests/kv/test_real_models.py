"""Claim 1 on the real models: own-position graft is byte-exact, past Gemma 3's 512-token window too.

These run the packaged models (prepared once per machine into the shared model cache), so
they are the slowest tests of the package; the tiny-model tests in test_graft.py cover the
same mechanics in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flywheel.cli import main
from flywheel.engine import Engine
from flywheel.errors import FingerprintMismatchError
from flywheel.kv import capture, graft, parse_artifact
from flywheel.kv import exactness as verify_graft

pytestmark = pytest.mark.real_model

GEMMA_WINDOW = 512


def test_default_model_graft_is_sha_equal_inside_the_batched_schedule(real_engine: Engine, tmp_path: Path) -> None:
    report = verify_graft.run_slots(real_engine, samples=4, prefix_tokens=[35, GEMMA_WINDOW + 88], slots=4,
                                    workdir=tmp_path)
    assert report.ok and report.sha_equal == 4 and report.kl_max == 0.0
    assert report.slot_count_invariant          # one slot alone == beside three neighbours, bit for bit
    assert report.prompt_sha_equal == 4         # and the continuation prefilled as a prompt in the steps


@pytest.fixture(scope="module")
def smollm() -> Engine:
    """SmolLM2-135M (Llama architecture), the second packaged model."""
    return Engine.load("smollm2-135m")


def test_default_model_graft_is_sha_equal_within_and_past_the_sliding_window(real_engine: Engine,
                                                                           tmp_path: Path) -> None:
    report = verify_graft.run(real_engine, samples=2, prefix_tokens=[35, GEMMA_WINDOW + 88], offset=3,
                              workdir=tmp_path)
    assert report.ok, [(s.prefix_tokens, s.fresh_sha256, s.graft_sha256) for s in report.per_sample]
    assert report.sha_equal == 2
    assert report.kl_max == 0.0
    assert report.argmax_agreement == 1.0
    assert [s.prefix_tokens for s in report.per_sample] == [35, GEMMA_WINDOW + 88]
    # The controls: a shifted graft (RoPE re-rotation) is measurably not the same computation,
    # and neither is a one-pass prefill of prefix + continuation against the chunked schedule.
    assert report.offset_kl_max is not None and report.offset_kl_max > 0.0
    assert report.one_pass_sha_equal is False
    assert report.one_pass_max_abs_diff is not None and report.one_pass_max_abs_diff > 0.0


def test_second_architecture_grafts_exactly_and_refuses_the_default_models_artifacts(real_engine: Engine,
                                                                                     smollm: Engine) -> None:
    report = verify_graft.run(smollm, samples=2, prefix_tokens=[35, 300])
    assert report.ok and report.kl_max == 0.0
    assert smollm.fingerprint.digest != real_engine.fingerprint.digest
    ids = real_engine.encode("The sum of the first ten positive integers is", bos=True)
    cache, last = real_engine.prefill(ids)
    foreign = parse_artifact(capture(real_engine, cache, ids, last).to_bytes())
    with pytest.raises(FingerprintMismatchError):
        graft(smollm, foreign)


def test_verify_graft_cli_on_the_default_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--library", str(tmp_path / "lib"), "verify-graft", "--samples", "1",
                                       "--prefix-tokens", "40", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output.strip().splitlines()[-1])
    assert payload["model"] == "gemma3-270m"
    assert payload["samples"] == 1 and payload["sha_equal"] == 1
    assert payload["argmax_agreement"] == 1.0 and payload["kl_max"] == 0.0
    assert payload["prefix_tokens"] == [40]
    assert len(payload["fingerprint"]) == 64
