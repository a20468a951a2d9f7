"""Every registered family: seeded, distinct, exactly sized, and its worked solution's arithmetic is right."""

from __future__ import annotations

import ast
import json
import operator
import re
from fractions import Fraction

import pytest

from flywheel.families import FAMILIES, word_families
from flywheel.problemsets import generate

ALL = sorted(FAMILIES)
WORD = [f.name for f in word_families()]
CONSTANTS = {Fraction(4), Fraction(60), Fraction(100)}  # days in the average, minutes per hour, percent / cm per m
STEP = re.compile(r"(\d+(?: [-+*/] \d+)+) = (\d+)")
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _exact(expr: str) -> Fraction:
    """Evaluate `12 * 5 / 100` with exact fractions (the expression is only digits and + - * /)."""
    def walk(node: ast.expr) -> Fraction:
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return Fraction(OPS[type(node.op)](walk(node.left), walk(node.right)))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        raise ValueError(ast.dump(node))
    return walk(ast.parse(expr, mode="eval").body)


def test_at_least_eight_word_families_are_registered() -> None:
    assert len(WORD) >= 8 and {"arith", "linear"} <= set(FAMILIES)
    assert all(FAMILIES[name].kind == "symbolic" for name in ("arith", "linear"))


@pytest.mark.parametrize("name", ALL)
def test_a_seed_gives_the_same_distinct_problems_and_other_seeds_fresh_ones(name: str) -> None:
    a = generate(name, n=200, seed=1)
    assert a == generate(name, n=200, seed=1)
    assert len({p.text for p in a}) == 200 and len({p.id for p in a}) == 200
    b = generate(name, n=200, seed=2)
    assert len({p.text for p in a} & {p.text for p in b}) < 20   # fresh draws (overlap only by chance)
    assert all(p.source == f"gen:{name}" and p.meta["family"] == name and p.meta["seed"] == "1" for p in a)
    assert [p.meta["index"] for p in a[:3]] == ["0", "1", "2"] and a[0].id == f"gen-{name}-s1-0"


@pytest.mark.parametrize("name", WORD)
def test_worked_solution_steps_are_true_grounded_and_end_at_the_reference(name: str) -> None:
    for p in generate(name, n=60, seed=3) + generate(name, n=20, seed=4, split="heldout"):
        assert p.reference is not None and p.solution is not None
        assert re.fullmatch(r"[0-9]+", p.reference), p.reference          # plain integer answers
        assert p.solution.endswith(f"= {p.reference}.") and "answer" not in p.solution.lower()
        assert len(p.solution.split()) <= 60, p.solution
        steps = STEP.findall(p.solution)
        assert 2 <= len(steps) <= 5, p.solution
        known = {Fraction(int(x)) for x in re.findall(r"\d+", p.text)} | CONSTANTS
        for expr, result in steps:
            assert _exact(expr) == int(result), f"{expr} = {result} in {p.solution!r}"
            operands = {Fraction(int(x)) for x in re.findall(r"\d+", expr)}
            assert operands <= known, f"{operands - known} appear from nowhere in {p.solution!r}"
            known.add(Fraction(int(result)))
        assert steps[-1][1] == p.reference


@pytest.mark.parametrize("name", ALL)
def test_meta_records_the_parameters_that_rebuild_the_problem(name: str) -> None:
    fam = FAMILIES[name]
    for p in generate(name, n=30, seed=5):
        inst = fam.instance(int(p.meta["number"]))
        assert (inst.text, inst.solution, inst.answer) == (p.text, p.solution, p.reference)
        assert json.loads(p.meta["params"]) == inst.params


@pytest.mark.parametrize("name", ALL)
def test_problem_numbers_decode_and_encode_one_to_one(name: str) -> None:
    import random

    fam = FAMILIES[name]
    numbers = set(random.Random(name).sample(range(fam.size), 3000)) | {0, fam.size - 1}
    texts = {fam.instance(i).text for i in numbers}
    assert len(texts) == len(numbers)                                     # distinct numbers, distinct texts
    assert all(fam.index_of(fam.params(i)) == i for i in numbers)
    with pytest.raises(IndexError):
        fam.params(fam.size)


@pytest.mark.parametrize(("name", "size"), [("linear", 13_640), ("units", 8_448), ("recipe", 43_200)])
def test_small_families_have_exactly_their_stated_size(name: str, size: int) -> None:
    """Enumerate every problem: the stated size is the number of distinct texts, not an estimate."""
    fam = FAMILIES[name]
    assert fam.size == size
    assert len({fam.instance(i).text for i in range(size)}) == size
