"""What a generated family is: a template over a finite, enumerable parameter space.

A family's problems are numbered 0 .. size-1; a number decodes (mixed radix over the family's
axes) to one assignment of parameters and so to one problem text. The template shows every
parameter, so distinct numbers give distinct texts and `size` is exact, not an estimate.
Sampling n distinct problems is therefore `random.sample` over a range: no retry loop.

Splits: a keyed permutation of 0 .. size-1 (fixed per family, independent of the seed) puts
the first `size // HELDOUT_EVERY` positions in `heldout` and the rest in `train`, so the two
never share a problem whatever seeds are used, and their sizes are known exactly.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import perm, prod
from typing import Literal, overload

Split = Literal["train", "heldout"]
SPLITS: tuple[Split, ...] = ("train", "heldout")
HELDOUT_EVERY = 5  # one problem in five is held out: 20% of every family
Kind = Literal["symbolic", "word"]

Value = int | str | tuple[str, ...]
Params = dict[str, Value]
Derived = dict[str, int | str]  # what `compute` adds; must hold "answer"


NAMES = ("Ava", "Ben", "Chloe", "Diego", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jamal", "Keiko", "Liam",
         "Maya", "Noah", "Olivia", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yusuf")


def ints(p: Params, *keys: str) -> tuple[int, ...]:
    """The integer parameters `keys` of `p`, in order (a typed view for `compute` functions)."""
    out = tuple(p[k] for k in keys)
    if not all(isinstance(v, int) for v in out):
        raise TypeError(f"expected integers for {keys}, got {out}")
    return out  # type: ignore[return-value]  # checked just above


class Distinct(Sequence[tuple[str, ...]]):
    """All ordered k-tuples of distinct items (e.g. three different names), indexable without listing them."""

    def __init__(self, items: Sequence[str], k: int) -> None:
        if len(set(items)) != len(items) or not 0 < k <= len(items):
            raise ValueError(f"need {k} distinct items, got {list(items)!r}")
        self.items, self.k = tuple(items), k

    def __len__(self) -> int:
        return perm(len(self.items), self.k)

    @overload
    def __getitem__(self, i: int) -> tuple[str, ...]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[str, ...]]: ...
    def __getitem__(self, i: int | slice) -> tuple[str, ...] | Sequence[tuple[str, ...]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not 0 <= i < len(self):
            raise IndexError(i)
        left, out = list(self.items), []
        for _ in range(self.k):  # mixed radix: n, n-1, ..., choosing from what is left
            i, digit = divmod(i, len(left))
            out.append(left.pop(digit))
        return tuple(out)

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        """Inverse of indexing, without scanning (`Sequence.index` would walk all n!/(n-k)! tuples)."""
        if not (isinstance(value, tuple) and len(value) == self.k and len(set(value)) == self.k
                and all(v in self.items for v in value)):
            raise ValueError(f"{value!r} is not in {self!r}")
        left, digits = list(self.items), []
        for v in value:
            digits.append((left.index(v), len(left)))
            left.remove(v)
        i = 0
        for digit, radix in reversed(digits):  # the first choice is the least significant digit
            i = i * radix + digit
        return i

    def __repr__(self) -> str:
        return f"Distinct({len(self.items)} items, k={self.k})"


Axis = tuple[str, Sequence[Value]]


@dataclass(frozen=True)
class Instance:
    """One problem of a family: its number in the family, parameters, text, worked solution, answer."""

    index: int
    params: dict[str, int | str]
    text: str
    solution: str
    answer: str


@dataclass(frozen=True)
class Family:
    """A template family. `template`/`solution` are `str.format` strings over the parameters and
    what `compute` derives from them (`answer` included); `legacy` is an older sampler that some
    families keep so that sets recorded before the registry stay byte-identical."""

    name: str
    description: str
    template: str
    solution: str
    axes: tuple[Axis, ...]
    compute: Callable[[Params], Derived]
    kind: Kind = "word"
    legacy: Callable[[random.Random], Params] | None = None

    @property
    def size(self) -> int:
        """How many distinct problems the family can produce."""
        return prod(len(values) for _, values in self.axes)

    def split_size(self, split: Split | None) -> int:
        """How many distinct problems `split` holds (the whole family for None)."""
        held = self.size // HELDOUT_EVERY
        return self.size if split is None else held if split == "heldout" else self.size - held

    def params(self, index: int) -> Params:
        """Decode problem number `index` (0 .. size-1) into one value per axis; the last axis varies fastest."""
        if not 0 <= index < self.size:
            raise IndexError(f"{self.name}: problem {index} outside 0..{self.size - 1}")
        out: Params = {}
        for name, values in reversed(self.axes):
            index, digit = divmod(index, len(values))
            out[name] = values[digit]
        return {name: out[name] for name, _ in self.axes}

    def index_of(self, params: Params) -> int:
        """The problem number of `params` (inverse of `params`)."""
        index = 0
        for name, values in self.axes:
            index = index * len(values) + values.index(params[name])
        return index

    def render(self, params: Params, index: int) -> Instance:
        """Fill the templates; people tuples become `name0`, `name1`, ... ."""
        flat: dict[str, int | str] = {}
        for key, value in params.items():
            if isinstance(value, tuple):
                flat.update({f"{key}{i}": v for i, v in enumerate(value)})
            else:
                flat[key] = value
        derived = self.compute(params)
        values = {**flat, **derived}
        return Instance(index, flat, self.template.format(**values), self.solution.format(**values),
                        str(derived["answer"]))

    def instance(self, index: int) -> Instance:
        return self.render(self.params(index), index)

    def position_to_index(self, position: int) -> int:
        """The keyed permutation that orders the family for splitting (a bijection on 0 .. size-1)."""
        return _permute(position, self.size, f"split:{self.name}")

    def split_of(self, index: int) -> Split:
        """Which split problem number `index` belongs to (whether or not a split was asked for)."""
        position = _permute(index, self.size, f"split:{self.name}", inverse=True)
        return "heldout" if position < self.size // HELDOUT_EVERY else "train"

    def sample(self, n: int, seed: int, split: Split | None = None) -> list[Instance]:
        """`n` distinct problems drawn with `seed` from `split` (or the whole family). Caller checks n <= split_size."""
        if split is None:
            if self.legacy is not None:
                return self._sample_legacy(n, seed)
            rng = random.Random(f"{self.name}:{seed}")  # str seeds hash stably (sha512), unlike hash()
            return [self.instance(i) for i in rng.sample(range(self.size), n)]
        held = self.size // HELDOUT_EVERY
        lo, hi = (0, held) if split == "heldout" else (held, self.size)
        rng = random.Random(f"{self.name}:{seed}:{split}")
        return [self.instance(self.position_to_index(p)) for p in rng.sample(range(lo, hi), n)]

    def _sample_legacy(self, n: int, seed: int) -> list[Instance]:
        assert self.legacy is not None
        rng = random.Random(f"{self.name}:{seed}")
        out: list[Instance] = []
        seen: set[str] = set()
        while len(out) < n:  # terminates: the caller refused n > size
            params = self.legacy(rng)
            inst = self.render(params, self.index_of(params))
            if inst.text not in seen:
                seen.add(inst.text)
                out.append(inst)
        return out


def _permute(x: int, size: int, key: str, *, inverse: bool = False) -> int:
    """A keyed bijection on 0 .. size-1 (or its inverse): a 4-round Feistel network over
    2^(2h) >= size, cycle-walked back into range (about 4 walks at most on average, as 2^(2h) < 4 * size)."""
    if size <= 1:
        return x
    half = ((size - 1).bit_length() + 1) // 2
    mask = (1 << half) - 1

    def mix(r: int, half_value: int) -> int:
        digest = hashlib.blake2b(f"{key}:{r}:{half_value}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") & mask

    while True:
        left, right = x >> half, x & mask
        if inverse:
            for r in reversed(range(4)):
                left, right = right ^ mix(r, left), left
        else:
            for r in range(4):
                left, right = right, left ^ mix(r, right)
        x = (left << half) | right
        if x < size:
            return x
