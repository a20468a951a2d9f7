"""The registry is the extension point: a new family registers like the built-ins and is usable by spec."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flywheel.errors import InputError
from flywheel.families import FAMILIES, Family, family, register
from flywheel.families.base import NAMES, Derived, Distinct, Params, ints
from flywheel.problemsets import load_problem_set


@pytest.fixture
def toy() -> Iterator[str]:
    with FAMILIES.isolated():   # what the test registers is gone afterwards
        @family("toy", "apples shared out", template="{name} shares {a} apples among {k} friends. How many each?",
                solution="{a} / {k} = {answer}.", axes=(("name", NAMES[:2]), ("k", range(2, 4)), ("each", range(1, 4))))
        def _toy(p: Params) -> Derived:
            k, each = ints(p, "k", "each")
            return {"a": k * each, "answer": each}
        yield "toy"


def test_a_registered_family_is_listed_sized_and_generated_by_spec(toy: str) -> None:
    assert FAMILIES[toy].size == 2 * 2 * 3
    s = load_problem_set(f"gen:{toy}?n=10&seed=1&split=train")                  # the whole train split
    assert len({p.text for p in s.problems}) == 10 and all(p.source == "gen:toy" for p in s.problems)
    with pytest.raises(InputError, match="n=11 but gen:toy has only 10 distinct problems in its train split"):
        load_problem_set(f"gen:{toy}?n=11&seed=1&split=train")
    with pytest.raises(InputError, match=r"toy\s+12\s+apples shared out"):
        load_problem_set("gen:")
    assert "toy" in {p.meta["family"] for p in load_problem_set("gen:all?n=2").problems}


def test_family_names_are_registered_once(toy: str) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(FAMILIES[toy])
    with pytest.raises(ValueError, match="other than 'all'"):
        register(Family("all", "", "", "", (), lambda p: {"answer": 0}))


def test_distinct_tuples_index_both_ways_without_listing() -> None:
    people = Distinct(NAMES, 3)
    assert len(people) == 24 * 23 * 22
    assert [people.index(people[i]) for i in (0, 1, 777, len(people) - 1)] == [0, 1, 777, len(people) - 1]
    assert len(set(people[0])) == 3
    with pytest.raises(ValueError):
        people.index(("Ava", "Ava", "Ben"))
