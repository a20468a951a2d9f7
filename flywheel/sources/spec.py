"""Reading a set spec's query (`?n=6&seed=1`): one key once, plain decimal integers, no surprises."""

from __future__ import annotations

import re
from dataclasses import dataclass

from flywheel.errors import InputError


@dataclass(frozen=True)
class Spec:
    """A spec as a source receives it: as typed, the part after its prefix, and its query keys."""

    text: str                # as the user typed it: "gen:ages?n=5&seed=1"
    body: str                # after the source's prefix, before `?`: "ages"
    query: dict[str, str]    # {"n": "5", "seed": "1"}

    def int_param(self, key: str, default: int) -> int:
        """`query[key]` as a plain decimal integer (n >= 1, anything else >= 0), or `default`."""
        return int_param(self.query, key, default, self.text)


def split_query(spec: str) -> tuple[str, dict[str, str]]:
    """`"gen:ages?n=5"` -> (`"gen:ages"`, {"n": "5"}); a key given twice is refused."""
    from urllib.parse import parse_qsl

    base, _, qs = spec.partition("?")
    pairs = parse_qsl(qs, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        twice = sorted({k for k, _ in pairs if sum(k == j for j, _ in pairs) > 1})
        raise InputError(f"{spec}: {', '.join(twice)} given more than once", hint="give each key once")
    return base, query


def check_keys(query: dict[str, str], allowed: tuple[str, ...], spec: str, *, example: str) -> None:
    """Refuse a key the source does not read, naming the ones it does."""
    unknown = [k for k in query if k not in allowed]
    if unknown:
        raise InputError(f"{spec}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"allowed: {', '.join(allowed)}", hint=f"e.g. {example!r}")


def int_param(query: dict[str, str], key: str, default: int, spec: str) -> int:
    """`query[key]` as a plain decimal integer (n >= 1, anything else >= 0), or `default`."""
    raw = query.get(key)
    if raw is None:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
        raise InputError(f"{spec}: {key}={raw!r} is not an integer", hint=f"e.g. {key}=10")
    if len(raw.strip()) > 40:
        raise InputError(f"{spec}: {key} has {len(raw.strip())} digits; that is not a usable {key}")
    value = int(raw)
    if key == "n" and value < 1:
        raise InputError(f"{spec}: n={value} must be a positive integer", hint="e.g. n=10")
    if value < 0:
        raise InputError(f"{spec}: {key}={value} must be 0 or more")
    return value
