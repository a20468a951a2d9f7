"""Money word problems: a percentage discount, change from a bill."""

from __future__ import annotations

from flywheel.families.base import NAMES, Derived, Distinct, Params, ints
from flywheel.families.registry import family

ITEMS = ("shirts", "books", "lamps", "chairs", "backpacks", "jackets", "games", "plants")
SUPPLIES = ("notebooks", "pens", "erasers", "folders", "markers", "rulers")


@family("discount", "percent discount on a bulk purchase (price, discount, amount paid)",
        template=("{name} buys {q} {item} at {p} dollars each. The shop takes {d}% off the total. "
                  "How many dollars does {name} pay?"),
        solution=("The {item} cost {q} * {p} = {total} dollars. The discount is {total} * {d} / 100 = {off} dollars. "
                  "{name} pays {total} - {off} = {answer}."),
        axes=(("name", NAMES), ("item", ITEMS), ("q", range(2, 10)), ("p", range(20, 201, 20)),
              ("d", range(5, 55, 5))))
def _discount(p: Params) -> Derived:
    q, price, d = ints(p, "q", "p", "d")
    total = q * price
    off = total * d // 100  # exact: price is a multiple of 20 and d of 5
    return {"total": total, "off": off, "answer": total - off}


@family("change", "change from a 100-dollar bill after buying two kinds of item",
        template=("{name} buys {q1} {item0} at {p1} dollars each and {q2} {item1} at {p2} dollars each, "
                  "paying with a 100-dollar bill. How much change, in dollars, does {name} get?"),
        solution=("The {item0} cost {q1} * {p1} = {c1} dollars. The {item1} cost {q2} * {p2} = {c2} dollars. "
                  "Together that is {c1} + {c2} = {total} dollars. The change is 100 - {total} = {answer}."),
        axes=(("name", NAMES), ("item", Distinct(SUPPLIES, 2)), ("q1", range(2, 7)), ("p1", range(2, 10)),
              ("q2", range(2, 9)), ("p2", range(2, 6))))
def _change(p: Params) -> Derived:
    q1, p1, q2, p2 = ints(p, "q1", "p1", "q2", "p2")
    c1, c2 = q1 * p1, q2 * p2  # at most 6 * 9 + 8 * 5 = 94 < 100
    return {"c1": c1, "c2": c2, "total": c1 + c2, "answer": 100 - c1 - c2}
