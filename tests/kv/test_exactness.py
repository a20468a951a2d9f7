"""`flywheel.kv.exactness` (what `flywheel verify-graft` measures) on the tiny models: a graft read
back from its file continues byte for byte like the live cache, and the report says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flywheel.engine import Engine
from flywheel.kv import exactness
from flywheel.testing import TINY_SLIDING_WINDOW


@pytest.mark.parametrize("kind", ["tiny_gemma", "tiny_llama", "tiny_qwen"])
def test_every_sample_grafts_byte_identical_across_the_window(kind: str, request: pytest.FixtureRequest,
                                                              tmp_path: Path) -> None:
    engine: Engine = request.getfixturevalue(kind)
    lengths = [5, 2 * TINY_SLIDING_WINDOW + 1]
    seen: list[exactness.Sample] = []
    report = exactness.run(engine, samples=3, prefix_tokens=lengths, workdir=tmp_path, progress=seen.append)
    assert report.ok and report.sha_equal == 3 and report.kl_max == 0.0 and report.argmax_agreement == 1.0
    assert [s.prefix_tokens for s in seen] == [5, 2 * TINY_SLIDING_WINDOW + 1, 5] == \
        [s.prefix_tokens for s in report.per_sample]        # the lengths cycle, reported as each ends
    assert all(s.fresh_sha256 == s.graft_sha256 and s.artifact_bytes > 0 for s in seen)
    assert report.fingerprint == engine.fingerprint.digest
    assert not any(tmp_path.rglob("*.kv"))                    # every artifact file is gone afterwards


def test_the_shifted_control_is_measured_and_does_not_touch_the_verdict(tiny_gemma: Engine) -> None:
    report = exactness.run(tiny_gemma, samples=2, prefix_tokens=[2 * TINY_SLIDING_WINDOW], offset=3)
    assert report.ok and report.offset == 3
    assert report.offset_kl_max is not None and 0.0 <= report.offset_kl_max < 1e-2
    assert report.offset_argmax_agreement is not None and report.offset_argmax_agreement > 0.5
    assert isinstance(report.one_pass_sha_equal, bool) and report.one_pass_max_abs_diff is not None
    assert exactness.run(tiny_gemma, samples=1, prefix_tokens=[8]).offset_kl_max is None   # no offset: none


def test_kl_and_agreement_of_equal_and_of_disagreeing_logits() -> None:
    p = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    assert exactness.kl_and_agreement(p, p.clone()) == (0.0, 1.0)
    q = torch.tensor([[2.0, 0.0, 0.0], [3.0, 0.0, 0.0]])    # the second position picks another token
    kl, agree = exactness.kl_and_agreement(p, q)
    assert kl > 0.5 and agree == 0.5


def test_a_report_is_ok_only_when_every_sample_matched() -> None:
    def report(samples: int, equal: int) -> exactness.Report:
        return exactness.Report(model="m", fingerprint="f" * 64, samples=samples, sha_equal=equal, kl_max=0.0,
                                argmax_agreement=1.0, prefix_tokens=[8])

    assert report(3, 3).ok and report(3, 3).to_json()["ok"] is True
    assert not report(3, 2).ok and report(3, 2).to_json()["ok"] is False
    assert not report(0, 0).ok                               # nothing measured proves nothing


def test_the_corpus_is_real_text_of_the_asked_length_and_always_the_same(tiny_gemma: Engine) -> None:
    ids = exactness.corpus_ids(tiny_gemma, 300)
    assert len(ids) == 300 and ids == exactness.corpus_ids(tiny_gemma, 300)
    assert exactness.corpus_ids(tiny_gemma, 40) == ids[:40]
    assert len(set(tiny_gemma.decode_text(ids).split())) > 20    # words, not one repeated token
