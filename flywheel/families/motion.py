"""Rates over time: a machine's output, a two-leg trip, two people working together."""

from __future__ import annotations

from flywheel.families.base import NAMES, Derived, Distinct, Params, ints
from flywheel.families.registry import family


@family("rates", "a per-minute rate over hours and minutes (unit conversion, then rate * time)",
        template=("A machine at {name}'s factory fills {r} {thing} every minute. "
                  "How many {thing} does it fill in {h} hours and {m} minutes?"),
        solution=("{h} hours is {h} * 60 = {hm} minutes. In total that is {hm} + {m} = {t} minutes. "
                  "The machine fills {t} * {r} = {answer}."),
        axes=(("name", NAMES), ("thing", ("bottles", "jars", "cans", "boxes")), ("r", range(3, 26)),
              ("h", range(2, 6)), ("m", range(5, 56, 5))))
def _rates(p: Params) -> Derived:
    r, h, m = ints(p, "r", "h", "m")
    return {"hm": h * 60, "t": h * 60 + m, "answer": (h * 60 + m) * r}


@family("speed", "distance left on a trip after two legs at different speeds",
        template=("{name} drives {t1} hours at {v1} km per hour, then {t2} hours at {v2} km per hour. "
                  "The whole trip is {total} km. How many km are left to drive?"),
        solution=("The first part covers {v1} * {t1} = {d1} km. The second part covers {v2} * {t2} = {d2} km. "
                  "Together that is {d1} + {d2} = {d} km. Left to drive: {total} - {d} = {answer}."),
        axes=(("name", NAMES), ("t1", range(2, 6)), ("v1", range(40, 95, 5)), ("t2", range(2, 5)),
              ("v2", range(40, 95, 5)), ("rest", range(10, 160, 10))))
def _speed(p: Params) -> Derived:
    t1, v1, t2, v2, rest = ints(p, "t1", "v1", "t2", "v2", "rest")
    d1, d2 = v1 * t1, v2 * t2
    return {"d1": d1, "d2": d2, "d": d1 + d2, "total": d1 + d2 + rest, "answer": rest}


@family("work", "two people working together at known rates on what is left of a job",
        template=("{name0} and {name1} must pack {total} {thing}. {name0} has already packed {done} of them. "
                  "{name0} packs {r1} {thing} per hour and {name1} packs {r2} per hour. "
                  "Working together, how many more hours do they need?"),
        solution=("{total} - {done} = {left} {thing} remain. Together they pack {r1} + {r2} = {r} per hour. "
                  "They need {left} / {r} = {answer}."),
        axes=(("name", Distinct(NAMES, 2)), ("thing", ("boxes", "jars", "crates", "bags")),
              ("done", range(5, 55, 5)), ("r1", range(3, 16)), ("r2", range(3, 16)), ("h", range(2, 10))))
def _work(p: Params) -> Derived:
    done, r1, r2, h = ints(p, "done", "r1", "r2", "h")
    left = (r1 + r2) * h
    return {"total": done + left, "left": left, "r": r1 + r2, "answer": h}
