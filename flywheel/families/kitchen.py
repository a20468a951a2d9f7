"""Quantities: scaling a recipe, a ratio mixture, cutting a length given in other units."""

from __future__ import annotations

from flywheel.families.base import NAMES, Derived, Distinct, Params, ints
from flywheel.families.registry import family

COLORS = ("red", "blue", "yellow", "white", "green", "black")


@family("recipe", "scaling a recipe to a number of servings and adding its ingredients",
        template=("A recipe for {s} {dish} uses {a} cups of flour and {b} cups of sugar. {name} wants to make "
                  "{t} {dish}. How many cups of flour and sugar does {name} need in total?"),
        solution=("{name} makes {t} / {s} = {k} batches. One batch uses {a} + {b} = {c} cups. "
                  "In total that is {k} * {c} = {answer}."),
        axes=(("name", NAMES), ("dish", ("cookies", "muffins", "pancakes", "scones", "waffles")),
              ("s", range(4, 25, 4)), ("k", range(2, 7)), ("a", range(2, 6)), ("b", range(2, 5))))
def _recipe(p: Params) -> Derived:
    s, k, a, b = ints(p, "s", "k", "a", "b")
    return {"t": s * k, "c": a + b, "answer": k * (a + b)}


@family("mixture", "one component of a mixture made in a given part-to-part ratio",
        template=("A paint mix uses {x} parts {color0} paint to {y} parts {color1} paint. {name} makes {total} "
                  "liters of the mix. How many liters of {color0} paint does {name} use?"),
        solution=("One batch has {x} + {y} = {parts} parts. Each part is {total} / {parts} = {k} liters. "
                  "The {color0} paint is {x} * {k} = {answer}."),
        axes=(("name", NAMES), ("color", Distinct(COLORS, 2)), ("x", range(2, 8)), ("y", range(2, 8)),
              ("k", range(2, 13))))
def _mixture(p: Params) -> Derived:
    x, y, k = ints(p, "x", "y", "k")
    return {"parts": x + y, "total": (x + y) * k, "answer": x * k}


@family("units", "a length in meters cut into centimeter pieces, some given away",
        template=("{name} has a {thing} {m} meters long and cuts it into pieces {c} centimeters long. "
                  "{name} gives away {g} pieces. How many pieces does {name} keep?"),
        solution=("{m} meters is {m} * 100 = {cm} centimeters. That makes {cm} / {c} = {k} pieces. "
                  "{name} keeps {k} - {g} = {answer}."),
        axes=(("name", NAMES), ("thing", ("ribbon", "rope", "string", "wire")), ("m", range(2, 13)),
              ("c", (10, 20, 25, 50)), ("g", range(2, 4))))
def _units(p: Params) -> Derived:
    m, c, g = ints(p, "m", "c", "g")
    k = m * 100 // c  # exact: c divides 100; k >= 4 > g
    return {"cm": m * 100, "k": k, "answer": k - g}
