"""Two arms from two studies (another model, another library) paired by problem: exact McNemar.

Reads the attempt files `bench/export_attempts.py` writes (one JSON line per attempt) and takes, from
each, attempt 0 (the greedy pass@1 one) of the run whose id ends with `-heldout-<arm>`; with
`--measure maj@K` or `pass@K`, the K sampled attempts of the run ending `-heldout-<arm>-kK`, scored
as `flywheel study` scores them (maj@K: `flows.study.majority` of the answers in attempt order, then
that attempt's verdict; pass@K: any verified), with the decode tokens of those attempts on the paired
problems. Problems are paired by id; `--part near|far|all` keeps
the GSM-Symbolic instances of train templates (near), of held-out templates (far), or every problem
both files hold. So two arms run as two studies (a long study split across sessions) pair as one.

`--by-template` adds, for GSM-Symbolic problems, each template's paired counts and its own exact McNemar,
marked `powered` only where the template has instances enough that all of them going one way could reach
p < 0.05 (6 or more), and a template-level sign test: each template scores +1 where A verified more of its
instances than B, -1 where fewer, and the exact two-sided sign test runs over those. Instances of one
template share their wording and arithmetic, so the instance-level McNemar counts them as independent when
they are not; the template-level test is the check that does not.

    .venv/bin/python bench/paired_runs.py \\
        --a bench/results/issue32-cold-qwen2.5-coder-0.5b-attempts.jsonl --a-arm graft \\
        --b bench/results/issue32-base-qwen2.5-coder-1.5b-attempts.jsonl --b-arm none --part near
    .venv/bin/python bench/paired_runs.py --a graft-study-attempts.jsonl --a-arm graft \\
        --b none-study-attempts.jsonl --b-arm none --part near --measure maj@4
    .venv/bin/python bench/paired_runs.py --a graft-study-attempts.jsonl --a-arm graft \\
        --b none-study-attempts.jsonl --b-arm none --part near --by-template
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

_TEMPLATE = re.compile(r"^gsm-symbolic-t(\d+)-")


_MEASURE = re.compile(r"^(pass|maj)@(\d+)$")


def held_out_attempts(path: Path, arm: str, measure: str = "pass@1") -> dict[str, list[dict[str, Any]]]:
    """problem id -> the attempts `measure` scores (attempt 0 of the greedy run, or the K sampled ones in order)."""
    m = _MEASURE.match(measure)
    if m is None or int(m.group(2)) < 1 or (m.group(1) == "maj" and int(m.group(2)) < 2):
        raise SystemExit(f"--measure {measure!r}: give pass@1, maj@K or pass@K (K >= 2)")
    k = int(m.group(2))
    suffix = f"-heldout-{arm}" + (f"-k{k}" if k > 1 else "")
    runs: set[str] = set()
    by_problem: dict[str, dict[int, dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        a = json.loads(line)
        if a["run_id"].endswith(suffix) and (k > 1 or a["attempt"] == 0):
            runs.add(a["run_id"])
            by_problem.setdefault(a["problem_id"], {})[a["attempt"]] = a
    if not by_problem:
        raise SystemExit(f"{path}: no attempt{' 0' if k == 1 else 's'} of a run ending in {suffix!r}")
    if len(runs) > 1:
        raise SystemExit(f"{path}: {len(runs)} held-out '{arm}' runs end in {suffix!r}: give one study's file")
    want = [0] if k == 1 else list(range(k))
    for pid, tries in by_problem.items():
        if sorted(tries) != want:
            raise SystemExit(f"{path}: {pid} has attempts {sorted(tries)} in its {measure} run, not 0..{k - 1} "
                             "(a cut run? finish it with `flywheel study --resume`)")
    return {pid: [tries[i] for i in want] for pid, tries in by_problem.items()}


def outcomes(attempts: dict[str, list[dict[str, Any]]], measure: str = "pass@1") -> dict[str, bool]:
    """problem id -> verified under `measure`, scored as `flywheel study` scores it."""
    if measure.startswith("maj@"):
        from flows.study import majority

        out = {}
        for pid, ordered in attempts.items():
            winner = majority([t["answer"] for t in ordered])
            out[pid] = winner is not None and bool(ordered[winner]["verified"])
        return out
    return {pid: any(bool(t["verified"]) for t in ordered) for pid, ordered in attempts.items()}


def decode_tokens(attempts: dict[str, list[dict[str, Any]]], ids: list[str]) -> int | None:
    """Decode tokens of the scored attempts of `ids`; None where the file does not record them."""
    tries = [t for pid in ids for t in attempts[pid]]
    if any(not isinstance(t.get("decode_tokens"), int) for t in tries):
        return None
    return sum(t["decode_tokens"] for t in tries)


def in_part(problem_id: str, part: str) -> bool:
    """Whether a problem belongs to `part` (GSM-Symbolic near = train template, far = held-out template)."""
    if part == "all":
        return True
    from flywheel.sources.gsm_symbolic import split_of

    m = _TEMPLATE.match(problem_id)
    return m is not None and split_of(int(m.group(1))) == ("train" if part == "near" else "heldout")


def paired_ids(a: dict[str, bool], b: dict[str, bool], part: str) -> list[str]:
    """The problems both hold in `part`, sorted."""
    return sorted(pid for pid in a.keys() & b.keys() if in_part(pid, part))


def compare(a: dict[str, bool], b: dict[str, bool], part: str) -> dict[str, Any]:
    """A against B on the problems both hold in `part`: counts, Wilson intervals, exact McNemar and its power."""
    from flywheel.stats import mcnemar_exact, mcnemar_power, wilson

    ids = paired_ids(a, b, part)
    n = len(ids)
    ca, cb = sum(a[p] for p in ids), sum(b[p] for p in ids)
    only_a = sum(a[p] and not b[p] for p in ids)
    only_b = sum(b[p] and not a[p] for p in ids)
    return {"part": part, "n": n, "only_in_a": len(a.keys() - b.keys()), "only_in_b": len(b.keys() - a.keys()),
            "a": {"correct": ca, "ci95": wilson(ca, n) if n else None},
            "b": {"correct": cb, "ci95": wilson(cb, n) if n else None},
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "power_3to1": mcnemar_power(only_a + only_b)}


POWERED_AT = 0.05


def by_template(a: dict[str, bool], b: dict[str, bool], part: str) -> dict[str, Any]:
    """A against B template by template on the GSM-Symbolic problems both hold in `part`, and the sign test over
    templates (A verified more of a template's instances than B, or fewer; ties left out)."""
    from flywheel.stats import mcnemar_exact

    groups: dict[int, list[str]] = {}
    for pid in paired_ids(a, b, part):
        m = _TEMPLATE.match(pid)
        if m is not None:
            groups.setdefault(int(m.group(1)), []).append(pid)
    if not groups:
        raise SystemExit(f"no GSM-Symbolic problem both files hold in part {part!r}: nothing to group by template")
    rows = []
    for template, ids in sorted(groups.items()):
        only_a = sum(a[p] and not b[p] for p in ids)
        only_b = sum(b[p] and not a[p] for p in ids)
        rows.append({"template": template, "n": len(ids), "a": sum(a[p] for p in ids), "b": sum(b[p] for p in ids),
                     "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
                     # the least p this template could give: every instance discordant, all one way
                     "powered": mcnemar_exact(len(ids), 0) < POWERED_AT})
    wins = sum(r["a"] > r["b"] for r in rows)
    losses = sum(r["a"] < r["b"] for r in rows)
    return {"templates": rows, "powered_templates": sum(r["powered"] for r in rows),
            "sign_test": {"templates": len(rows), "a_more": wins, "b_more": losses,
                          "tied": len(rows) - wins - losses, "p": mcnemar_exact(wins, losses)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="attempts file of study A")
    ap.add_argument("--a-arm", required=True, help="A's held-out arm (none, graft, ...)")
    ap.add_argument("--b", type=Path, required=True, help="attempts file of study B")
    ap.add_argument("--b-arm", required=True, help="B's held-out arm")
    ap.add_argument("--part", choices=("near", "far", "all"), default="all")
    ap.add_argument("--measure", default="pass@1",
                    help="pass@1 (the greedy attempt, default), maj@K or pass@K (the K sampled attempts)")
    ap.add_argument("--by-template", action="store_true",
                    help="also each GSM-Symbolic template's counts and the sign test over templates")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    args = ap.parse_args(argv)
    tries_a = held_out_attempts(args.a, args.a_arm, args.measure)
    tries_b = held_out_attempts(args.b, args.b_arm, args.measure)
    a, b = outcomes(tries_a, args.measure), outcomes(tries_b, args.measure)
    out = compare(a, b, args.part)
    paired = paired_ids(a, b, args.part)
    out.update(decode_tokens_a=decode_tokens(tries_a, paired), decode_tokens_b=decode_tokens(tries_b, paired))
    if args.by_template:
        out.update(by_template(a, b, args.part))
    out.update(a_file=str(args.a), a_arm=args.a_arm, b_file=str(args.b), b_arm=args.b_arm, measure=args.measure)
    if args.json:
        print(json.dumps(out, sort_keys=True))
        return 0
    print(f"{args.part} {args.measure} ({out['n']} paired): A {args.a_arm} {out['a']['correct']}/{out['n']} vs B {args.b_arm} "
          f"{out['b']['correct']}/{out['n']}; only A {out['only_a']}, only B {out['only_b']}, exact McNemar "
          f"p = {out['mcnemar_p']:.3g} (power at a 3:1 split {out['power_3to1']:.0%}); decode tokens A "
          f"{out['decode_tokens_a'] if out['decode_tokens_a'] is not None else 'not recorded'}, B "
          f"{out['decode_tokens_b'] if out['decode_tokens_b'] is not None else 'not recorded'}")
    if args.by_template:
        for r in out["templates"]:
            if r["only_a"] or r["only_b"]:
                print(f"  t{r['template']}: A {r['a']}/{r['n']} vs B {r['b']}/{r['n']}, p = {r['mcnemar_p']:.3g}"
                      f"{'' if r['powered'] else ' (not powered)'}")
        st = out["sign_test"]
        print(f"templates: {st['templates']} ({out['powered_templates']} powered alone); A more {st['a_more']}, "
              f"B more {st['b_more']}, tied {st['tied']}; sign test over templates p = {st['p']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
