"""Seeded generated problem families (see `base` for numbering and splits, `registry` to add one).

The built-ins load, as plug-ins do, on the first lookup (`flywheel.plugins`): `arith` and `linear`
(symbolic) and the GSM-Symbolic-style word-problem families in `money`, `motion`, `people` and
`kitchen`.
"""

from flywheel.families.base import HELDOUT_EVERY, SPLITS, Family, Instance, Split
from flywheel.families.registry import FAMILIES, builtin_word_families, family, register, word_families

__all__ = ["FAMILIES", "HELDOUT_EVERY", "SPLITS", "Family", "Instance", "Split", "builtin_word_families", "family",
           "register", "word_families"]
