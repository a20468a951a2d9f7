"""Problems about people: ages in relation to each other, a running average."""

from __future__ import annotations

from flywheel.families.base import NAMES, Derived, Distinct, Params, ints
from flywheel.families.registry import family


@family("ages", "three people's ages related by a difference and a multiple, some years on",
        template=("{name0} is {a} years old. {name1} is {d} years younger than {name0}. "
                  "{name2} is {m} times as old as {name1}. How old will {name2} be in {y} years?"),
        solution=("{name1} is {a} - {d} = {b} years old. {name2} is {m} * {b} = {c} years old. "
                  "In {y} years {name2} will be {c} + {y} = {answer}."),
        axes=(("name", Distinct(NAMES, 3)), ("b", range(2, 16)), ("d", range(3, 31)), ("m", range(2, 5)),
              ("y", range(2, 11))))
def _ages(p: Params) -> Derived:
    b, d, m, y = ints(p, "b", "d", "m", "y")
    return {"a": b + d, "c": m * b, "answer": m * b + y}


@family("average", "what the fourth day must bring to reach a target daily average",
        template=("{name} sold {x1} {thing} on Monday, {x2} on Tuesday and {x3} on Wednesday. How many must "
                  "{name} sell on Thursday to average {m} {thing} a day over the four days?"),
        solution=("An average of {m} over 4 days is {m} * 4 = {total} {thing}. So far {x1} + {x2} + {x3} = {sofar}. "
                  "On Thursday {name} must sell {total} - {sofar} = {answer}."),
        axes=(("name", NAMES), ("thing", ("cakes", "tickets", "books", "plants")), ("x1", range(10, 41)),
              ("x2", range(10, 41)), ("j", range(3, 11)), ("x4", range(5, 41))))
def _average(p: Params) -> Derived:
    x1, x2, j, x4 = ints(p, "x1", "x2", "j", "x4")
    x3 = 4 * j + (-(x1 + x2 + x4)) % 4  # makes the four-day total a multiple of 4: a whole average
    total = x1 + x2 + x3 + x4
    return {"x3": x3, "m": total // 4, "total": total, "sofar": x1 + x2 + x3, "answer": x4}
