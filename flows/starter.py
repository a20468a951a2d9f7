"""The starter library: verified worked solutions of the built-in word families, for an empty library.

A user who brings word problems with reference answers but no worked solutions starts with a
library that has nothing to graft, and a small model rarely verifies anything unaided, so nothing
is ever deposited and the flywheel never turns. `flywheel run` therefore seeds an empty library
(no artifact under the run's model fingerprint) with one worked solution per built-in family
(`starter_set()`: the project's own generators, train split, so never a held-out problem), each
verified against its reference at deposit like any other. They are marked in the catalog:
`deposited_by` is `STARTER`, so the report and `library ls` tell them from the model's own and
from a curator's. `flywheel run --no-starter` leaves an empty library empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flywheel.errors import DepositRefusedError
from flywheel.problemsets import load_problem_set

if TYPE_CHECKING:
    from flows.tasks import Env

#: `deposited_by` of starter entries: the catalog's mark, and the version of what was seeded.
STARTER = "starter:families-v1"


def starter_set() -> str:
    """The seeded problems: one per built-in word family, from the train split.

    Never `gen:all`: a plug-in's word family joins that, and its check is circular (the answer is its
    own generator's reference), so a plug-in's arithmetic bug would be seeded as verified knowledge
    marked as the project's. Plug-in families are left out of the starter set, whatever their kind.
    """
    from flywheel.families import builtin_word_families

    return "gen:" + "+".join(f.name for f in builtin_word_families()) + "?n=1&seed=1&split=train"


def seed_starter(env: Env) -> list[str]:
    """Deposit the starter solutions if the library has no artifact for this model; returns their SHA-256s."""
    eng, lib = env.engine(), env.open_library()
    if lib.catalog.list_artifacts(eng.fingerprint.digest, include_unverified=True):
        return []
    seeded = []
    for problem in load_problem_set(starter_set()).problems:
        if not problem.solution or not problem.reference:
            continue
        try:
            seeded.append(lib.deposit(eng, problem, problem.solution, problem.reference,
                                      deposited_by=STARTER).artifact_sha256)
        except DepositRefusedError:   # its own reference refuses it: never seeded unverified
            continue
    return seeded
