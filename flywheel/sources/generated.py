"""Generated families (`flywheel.families`): seeded word problems with references and worked solutions.

    gen:FAMILIES?n=N&seed=S&split=SPLIT      keys optional (n=50, seed=0, no split)
    gen:                                     refused with the list of families (name, size, description)

FAMILIES is one registered name (`gen:ages`), `all` (every word-problem family, N each, in
name order), or names joined by `+` (`gen:ages+rates+linear`). N is problems *per family* and
must be 1..size, where size is the family's (or split's) exact number of distinct problems.

Splits: every family is cut once, by a keyed permutation fixed per family and independent of
the seed, into `heldout` (one problem in five) and `train` (the rest). `split=train` and
`split=heldout` therefore never share a problem text for any seeds; ids then read
`gen-<family>-<split>-s<seed>-<i>`. Without `split` a set draws from the whole family (ids
`gen-<family>-s<seed>-<i>`, byte-identical to the pre-registry `arith`/`linear` sets). Either
way `Problem.meta` records family, seed, index, the problem's number in its family, the split
it belongs to, and its parameters (JSON).
"""

from __future__ import annotations

from flywheel.domain import canonical_json
from flywheel.errors import InputError
from flywheel.families import FAMILIES, SPLITS, Family, Split, word_families
from flywheel.sources.problem import Problem
from flywheel.sources.registry import Loaded, source
from flywheel.sources.spec import Spec

GEN_KEYS = ("n", "seed", "split")
DEFAULT_N = 50  # problems per family when a `gen:` spec gives no n


@source("gen", prefix="gen:", keys=GEN_KEYS, example="gen:ages?n=20&seed=1&split=train",
        description="the project's seeded word-problem families; `gen:` alone lists them")
def _load(spec: Spec) -> Loaded:
    problems = _generate(spec.body, n=spec.int_param("n", DEFAULT_N), seed=spec.int_param("seed", 0),
                         split=_split_param(spec.query, spec.text), label=spec.text)
    return problems, []


def _split_param(query: dict[str, str], spec: str) -> Split | None:
    raw = query.get("split")
    if raw is None:
        return None
    for split in SPLITS:
        if raw == split:
            return split
    raise InputError(f"{spec}: split={raw!r} is not one of {', '.join(SPLITS)}",
                     hint="leave split out to draw from the whole family")


def generate(family: str, *, n: int, seed: int, split: Split | None = None) -> list[Problem]:
    """`n` problems per family with fresh names and numbers from `seed`, each with reference and worked solution.

    Args:
        family: a registered name (`linear`), `all` (every word family), or names joined by `+` (`ages+rates`).
        n: problems per family; at most the family's (split's) number of distinct problems.
        seed: any integer >= 0; the same (family, n, seed, split) always gives the same problems.
        split: `train` or `heldout` to draw only from that part of each family, None for the whole family.
    Returns:
        the problems, family by family, ids `gen-<family>[-<split>]-s<seed>-<i>`.
    Raises:
        InputError: unknown family (an empty name lists them all) or n outside 1..size.

    Example: `generate("ages", n=2, seed=1, split="heldout")[0].meta["split"]` -> `"heldout"`.
    """
    split_part = f"&split={split}" if split else ""
    return _generate(family, n=n, seed=seed, split=split, label=f"gen:{family}?n={n}&seed={seed}{split_part}")


def _generate(expr: str, *, n: int, seed: int, split: Split | None, label: str) -> list[Problem]:
    fams = _resolve_families(expr)
    if n < 1 or seed < 0:
        raise InputError(f"{label}: n must be >= 1 and seed >= 0, got n={n}, seed={seed}")
    smallest = min(fams, key=lambda f: f.split_size(split))
    have = smallest.split_size(split)
    if n > have:  # refused before generating anything: sizes are exact, no loop can run dry
        where = f"in its {split} split" if split else "in all"
        raise InputError(f"{label}: n={n:,} but gen:{smallest.name} has only {have:,} distinct problems {where}",
                         hint=f"ask for n <= {have:,}" + (" per family" if len(fams) > 1 else ""))
    out: list[Problem] = []
    for fam in fams:
        tag = f"-{split}" if split else ""
        for i, inst in enumerate(fam.sample(n, seed, split)):
            meta = {"family": fam.name, "seed": str(seed), "index": str(i), "number": str(inst.index),
                    "split": fam.split_of(inst.index), "params": canonical_json(inst.params)}
            out.append(Problem(id=f"gen-{fam.name}{tag}-s{seed}-{i}", text=inst.text, reference=inst.answer,
                               solution=inst.solution, source=f"gen:{fam.name}", meta=meta))
    return out


def _resolve_families(expr: str) -> list[Family]:
    """`linear` -> [linear]; `all` -> every word family; `ages+rates` -> [ages, rates]."""
    if not expr.strip():
        raise InputError("gen: needs a family name; the families are:", listing=describe_families().splitlines(),
                         hint="e.g. gen:ages?n=20&seed=1&split=train, gen:all?n=10&seed=1&split=heldout, "
                              "gen:ages+rates?n=5")
    fams: list[Family] = []
    for name in expr.split("+"):
        if name == "all":
            fams.extend(word_families())
        elif name in FAMILIES:
            fams.append(FAMILIES[name])
        else:
            raise InputError(f"unknown generated family gen:{name}",
                             hint=f"known: {', '.join(sorted(FAMILIES))}, or all; `gen:` alone describes them")
    names = [f.name for f in fams]
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise InputError(f"gen:{expr} lists {', '.join(twice)} more than once")
    return fams


def describe_families() -> str:
    """One line per registered family: name, number of distinct problems, description."""
    width = max(len(name) for name in FAMILIES)
    lines = [f"  {f.name:<{width}}  {f.size:>13,}  {f.description}" for _, f in sorted(FAMILIES.items())]
    lines.append(f"  {'all':<{width}}  {'':>13}  every word-problem family above (n problems each)")
    return "\n".join(lines)
