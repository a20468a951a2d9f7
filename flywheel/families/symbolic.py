"""The original symbolic families. Their `legacy` samplers replay the pre-registry draws exactly,
so `gen:arith` / `gen:linear` without a split stay byte-identical for every (n, seed)."""

from __future__ import annotations

import random

from flywheel.families.base import Derived, Params, ints
from flywheel.families.registry import family


def _arith_draw(rng: random.Random) -> Params:
    a, b, c = rng.randint(11, 99), rng.randint(3, 19), rng.randint(2, 99)
    return {"a": a, "b": b, "c": c}


@family("arith", "two-step integer arithmetic: a * b + c",
        template="Compute {a} * {b} + {c}.",
        solution="First {a} * {b} = {product}. Then {product} + {c} = {answer}.",
        axes=(("a", range(11, 100)), ("b", range(3, 20)), ("c", range(2, 100))),
        kind="symbolic", legacy=_arith_draw)
def _arith(p: Params) -> Derived:
    a, b, c = ints(p, "a", "b", "c")
    return {"product": a * b, "answer": a * b + c}


def _linear_draw(rng: random.Random) -> Params:
    a, x, b = rng.randint(2, 12), rng.randint(-15, 15), rng.randint(1, 40)
    return {"a": a, "x": x, "b": b}


@family("linear", "one linear equation ax + b = c, solved for x",
        template="Solve for x: {a}x + {b} = {c}.",
        solution="Subtract {b} from both sides: {a}x = {ax}. Divide both sides by {a}: x = {answer}.",
        axes=(("a", range(2, 13)), ("x", range(-15, 16)), ("b", range(1, 41))),
        kind="symbolic", legacy=_linear_draw)
def _linear(p: Params) -> Derived:
    a, x, b = ints(p, "a", "x", "b")
    return {"c": a * x + b, "ax": a * x, "answer": x}
