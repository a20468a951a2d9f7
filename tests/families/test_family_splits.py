"""Train and held-out splits: disjoint for any seeds, exactly sized, recorded in ids and meta."""

from __future__ import annotations

import pytest

from flywheel.families import FAMILIES, HELDOUT_EVERY
from flywheel.families.base import _permute
from flywheel.problemsets import generate, load_problem_set

ALL = sorted(FAMILIES)


@pytest.mark.parametrize("name", ALL)
def test_train_and_heldout_never_share_a_problem_whatever_the_seeds(name: str) -> None:
    train = [p for seed in (1, 2, 3) for p in generate(name, n=300, seed=seed, split="train")]
    held = [p for seed in (1, 2, 3) for p in generate(name, n=300, seed=seed, split="heldout")]
    assert not {p.text for p in train} & {p.text for p in held}
    assert {p.meta["split"] for p in train} == {"train"} and {p.meta["split"] for p in held} == {"heldout"}
    assert train[0].id == f"gen-{name}-train-s1-0" and held[0].id == f"gen-{name}-heldout-s1-0"
    assert generate(name, n=300, seed=1, split="heldout") == held[:300]   # seeded within a split too


@pytest.mark.parametrize("name", ALL)
def test_split_sizes_add_up_to_the_family(name: str) -> None:
    fam = FAMILIES[name]
    held, train = fam.split_size("heldout"), fam.split_size("train")
    assert held == fam.size // HELDOUT_EVERY and held + train == fam.size == fam.split_size(None)


def test_split_membership_is_exact_over_a_whole_family() -> None:
    """linear, enumerated: the heldout positions map onto exactly the problems `split_of` calls heldout."""
    fam = FAMILIES["linear"]
    held = {fam.position_to_index(p) for p in range(fam.split_size("heldout"))}
    assert len(held) == 2_728 == fam.size // HELDOUT_EVERY
    assert held == {i for i in range(fam.size) if fam.split_of(i) == "heldout"}
    drawn = generate("linear", n=2_728, seed=9, split="heldout")               # the whole split
    assert {int(p.meta["number"]) for p in drawn} == held


def test_sets_without_a_split_record_which_split_each_problem_is_in() -> None:
    fam = FAMILIES["ages"]
    problems = generate("ages", n=200, seed=1)
    assert {p.meta["split"] for p in problems} == {"train", "heldout"}
    assert all(p.meta["split"] == fam.split_of(int(p.meta["number"])) for p in problems)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 16, 17, 100, 1_000])
def test_the_split_permutation_is_a_bijection_with_an_inverse(size: int) -> None:
    forward = [_permute(i, size, "k") for i in range(size)]
    assert sorted(forward) == list(range(size))
    assert [_permute(x, size, "k", inverse=True) for x in forward] == list(range(size))


def test_split_query_key_reaches_every_family_of_a_multi_family_spec() -> None:
    held = load_problem_set("gen:all?n=10&seed=1&split=heldout").problems
    train = load_problem_set("gen:all?n=10&seed=1&split=train").problems
    assert not {p.text for p in held} & {p.text for p in train}
    assert all(p.id.startswith(f"gen-{p.meta['family']}-heldout-s1-") for p in held)
