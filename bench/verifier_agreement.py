"""Verifier benchmark: an external table (Math-Verify's own public test cases, both verifiers side
by side against the expected verdicts), CHAMP self-verification, and agreement with Math-Verify on
CHAMP's stored model conversations' final answers, with checks per second for both, in one run.

    .venv/bin/python bench/verifier_agreement.py                   # 0-Shot conversations of all 4 models
    .venv/bin/python bench/verifier_agreement.py --settings all    # all 18 prompt settings (slow)
    .venv/bin/python bench/verifier_agreement.py --only external   # the external table alone
    .venv/bin/python bench/verifier_agreement.py --only classes    # the answer-class table alone (issue 22)

The external cases live in tests/verifiers/data/math_verify_cases.json (data copied with attribution;
`convention` marks a documented difference of convention, `truth` our judgement where Math-Verify's
expected verdict is wrong). The answer-class table (tests/verifiers/data/answer_classes.json, cases of
our own per class of issue 22, near-misses included) is reported beside it, per class. Math-Verify is
a dev-only comparison (`pip install math-verify`); the
verifier never imports it.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import champ_dataset  # noqa: E402

from verifiers import VerifierConfig, check  # noqa: E402


def final_answers(ds: object, settings: list[str] | None) -> list[tuple[str, str, str, str]]:
    """(problem id, conversation key, final model message, reference) for each stored conversation."""
    rows = []
    for pid, p in ds.problems.items():  # type: ignore[attr-defined]
        for key, conv in p.conversations.items():
            if settings is not None and key.split("|")[1] not in settings:
                continue
            texts = [m.text for m in conv.messages if m.role.startswith("Model.") and m.text]
            if texts:
                rows.append((pid, key, texts[-1], p.answer))
    return rows


def self_verification(ds: object, cfg: VerifierConfig) -> dict[str, int]:
    counts = collections.Counter()
    for p in ds.problems.values():  # type: ignore[attr-defined]
        counts["problems"] += 1
        counts["self_" + check(candidate=p.answer, reference=p.answer, config=cfg).status] += 1
        counts["self_text_" + check(candidate=p.answer, reference=p.answer, mode="text", config=cfg).status] += 1
        counts["last_step_" + check(candidate=p.solution.steps[-1].text, reference=p.answer, config=cfg).status] += 1
    return dict(sorted(counts.items()))


EXTERNAL = Path(__file__).resolve().parent.parent / "tests" / "verifiers" / "data" / "math_verify_cases.json"


def external_cases() -> tuple[list[dict[str, object]], dict[str, str]]:
    """(cases, conventions) of the external table; each case gets `truth` (expected unless overridden)."""
    data = json.loads(EXTERNAL.read_text())
    cases = data["cases"]
    for c in cases:
        c.setdefault("truth", c["expected"])
    return cases, data["conventions"]


def ours_external(case: dict[str, object], cfg: VerifierConfig) -> str:
    """Our status on one case; where Math-Verify's test rounds floats to p digits we allow 10^-p relative."""
    opts = case.get("mv_options") or {}
    precision = opts.get("precision") if isinstance(opts, dict) else None
    run_cfg = replace(cfg, tolerance=10.0 ** -int(precision)) if precision is not None else cfg
    return check(candidate=str(case["pred"]), reference=str(case["gold"]), config=run_cfg).status


def math_verify_external(case: dict[str, object]) -> str:
    """Math-Verify's verdict on one case with the settings its own test used: equal|not_equal|unparseable."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    opts = dict(case.get("mv_options") or {})  # type: ignore[call-overload]
    targets = opts.get("targets", ["latex", "expr"])
    configs = [LatexExtractionConfig(boxed_match_priority=0) if t == "latex" else ExprExtractionConfig()
               for t in targets if t != "default"]
    try:
        gold = parse(str(case["gold"]), configs) if configs else parse(str(case["gold"]))
        pred = parse(str(case["pred"]), configs) if configs else parse(str(case["pred"]))
        if not gold or not pred:
            return "unparseable"
        same = verify(gold, pred, float_rounding=opts.get("precision", 6), strict=opts.get("strict", True),
                      allow_set_relation_comp=opts.get("allow_set_relation_comp", False))
    except Exception:
        return "unparseable"
    return "equal" if same else "not_equal"


def external_table(cfg: VerifierConfig) -> list[tuple[dict[str, object], str, str]]:
    """Run both verifiers on the external cases and print the table; returns (case, ours, theirs)."""
    cases, conventions = external_cases()
    t0 = time.perf_counter()
    ours = [ours_external(c, cfg) for c in cases]
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = [math_verify_external(c) for c in cases]
    theirs_s = time.perf_counter() - t0
    rows = list(zip(cases, ours, theirs, strict=True))
    print(f"External table: {len(cases)} cases from Math-Verify's public tests "
          f"({sum('convention' in c for c in cases)} documented convention differences, "
          f"{sum(c['truth'] != c['expected'] for c in cases)} expected verdicts judged wrong)")
    print(f"  {'':46s} {'agree':>7s} {'false acc':>9s} {'false rej':>9s} {'unparseable':>11s} {'n':>4s}")
    for label, keep in (("all cases", lambda c: True), ("excluding convention differences",
                                                         lambda c: "convention" not in c)):
        for name, idx, yes in (("ours", 1, "equivalent"), ("Math-Verify", 2, "equal")):
            sel = [r for r in rows if keep(r[0])]
            agree = sum((r[idx] == yes) == bool(r[0]["truth"]) for r in sel)
            fa = sum(r[idx] == yes and not r[0]["truth"] for r in sel)
            fr = sum(r[idx] != yes and bool(r[0]["truth"]) for r in sel)
            unp = sum(r[idx] == "unparseable" for r in sel)
            print(f"  {name + ', ' + label:46s} {agree / len(sel):7.3f} {fa:9d} {fr:9d} {unp:11d} {len(sel):4d}")
    both = sum((o == "equivalent") == (t == "equal") for _, o, t in rows)
    print(f"  ours vs Math-Verify verdicts: {both}/{len(rows)} agree; checks/s ours {len(rows) / ours_s:.1f} "
          f"(worker), Math-Verify {len(rows) / theirs_s:.1f} (in process)")
    missed = [(c, o) for c, o, _ in rows if "convention" not in c and (o == "equivalent") != bool(c["truth"])]
    print(f"  our disagreements with the expected verdict outside conventions: {len(missed)}")
    for c, o in missed:
        print(f"    {c['id']} expected {c['truth']} ours {o}: {str(c['pred'])[-60:]!r} vs {str(c['gold'])[:40]!r}")
    used = collections.Counter(str(c["convention"]) for c in cases if "convention" in c)
    print("  convention differences (documented in the data file):")
    for key, n in sorted(used.items()):
        print(f"    {key:20s} {n:3d}  {conventions[key][:100]}")
    return rows


CLASSES = Path(__file__).resolve().parent.parent / "tests" / "verifiers" / "data" / "answer_classes.json"


def classes_table(cfg: VerifierConfig) -> None:
    """Both verifiers on our answer-class table: per class and overall agreement with the truth,
    false accepts, false rejects, unparseable; checks/s."""
    cases = json.loads(CLASSES.read_text())["cases"]
    t0 = time.perf_counter()
    ours = [check(candidate=c["candidate"], reference=c["reference"], config=cfg).status for c in cases]
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = [math_verify_external({"pred": f"${c['candidate']}$", "gold": f"${c['reference']}$"}) for c in cases]
    theirs_s = time.perf_counter() - t0
    print(f"Answer-class table: {len(cases)} cases of our own in {len({c['class'] for c in cases})} classes "
          f"({sum(not c['equivalent'] for c in cases)} must be rejected)")
    print(f"  {'class':22s} {'ours agree':>10s} {'fa':>3s} {'fr':>3s} {'unp':>4s}   {'M-V agree':>9s} {'fa':>3s} "
          f"{'fr':>3s} {'n':>4s}")
    groups = sorted({c["class"] for c in cases}, key=[c["class"] for c in cases].index)
    for name in [*groups, "all"]:
        idx = [i for i, c in enumerate(cases) if name in ("all", c["class"])]
        truth = [bool(cases[i]["equivalent"]) for i in idx]
        o = [ours[i] == "equivalent" for i in idx]
        m = [theirs[i] == "equal" for i in idx]
        unp = sum(ours[i] == "unparseable" for i in idx)

        def stats(said: list[bool], truth: list[bool] = truth) -> tuple[float, int, int]:
            return (sum(s == t for s, t in zip(said, truth, strict=True)) / len(truth),
                    sum(s and not t for s, t in zip(said, truth, strict=True)),
                    sum(t and not s for s, t in zip(said, truth, strict=True)))
        (oa, ofa, ofr), (ma, mfa, mfr) = stats(o), stats(m)
        print(f"  {name:22s} {oa:10.3f} {ofa:3d} {ofr:3d} {unp:4d}   {ma:9.3f} {mfa:3d} {mfr:3d} {len(idx):4d}")
    print(f"  checks/s ours {len(cases) / ours_s:.1f} (worker), Math-Verify {len(cases) / theirs_s:.1f} (in process)")


def math_verify_judge(text: str, reference: str) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(reference), parse(text)))
    except Exception:  # Math-Verify's own failures count as "not equal", as its callers see them
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default="0-Shot", help="comma-separated CHAMP prompt settings, or 'all'")
    ap.add_argument("--sample", type=int, default=40, help="disagreements written out")
    ap.add_argument("--out", default="/tmp/verifiers_disagreements.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("all", "external", "classes", "champ"), default="all")
    args = ap.parse_args()
    cfg = VerifierConfig()
    check(candidate="1", reference="1", config=cfg)  # start the worker outside the timed region
    if args.only in ("all", "external"):
        external_table(cfg)
        print()
    if args.only in ("all", "classes"):
        classes_table(cfg)
        print()
    if args.only in ("external", "classes"):
        return
    ds = champ_dataset.load("v0")

    t0 = time.perf_counter()
    sv = self_verification(ds, cfg)
    sv_s = time.perf_counter() - t0
    print("CHAMP self-verification (270 reference answers):")
    for k, v in sv.items():
        print(f"  {k:28s} {v}")

    settings = None if args.settings == "all" else args.settings.split(",")
    rows = final_answers(ds, settings)
    t0 = time.perf_counter()
    ours = [check(candidate=text, reference=ref, config=cfg) for _, _, text, ref in rows]
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mv = [math_verify_judge(text, ref) for _, _, text, ref in rows]
    mv_s = time.perf_counter() - t0

    table = collections.Counter((v.status, m) for v, m in zip(ours, mv, strict=True))
    print(f"\nAgreement on {len(rows)} final answers ({args.settings}; 4 models):")
    head = "ours / Math-Verify"
    print(f"  {head:22s} {'equal':>8s} {'not equal':>10s}")
    for st in ("equivalent", "not_equivalent", "unparseable", "timeout"):
        print(f"  {st:22s} {table[(st, True)]:8d} {table[(st, False)]:10d}")
    agree = sum(1 for v, m in zip(ours, mv, strict=True) if v.equivalent == m)
    print(f"  agreement (equivalent vs equal): {agree}/{len(rows)} = {agree / len(rows):.3f}")
    per_model = collections.defaultdict(collections.Counter)
    for (_, key, _, _), v, m in zip(rows, ours, mv, strict=True):
        per_model[key.split("|")[0]]["ours"] += v.equivalent
        per_model[key.split("|")[0]]["mv"] += m
        per_model[key.split("|")[0]]["n"] += 1
    print("  accepted per model (ours / Math-Verify / n):")
    for model, c in sorted(per_model.items()):
        print(f"    {model:16s} {c['ours']:5d} {c['mv']:5d} {c['n']:5d}")
    print(f"\nchecks/second: ours {len(rows) / ours_s:.1f} (worker process, sequential), "
          f"Math-Verify {len(rows) / mv_s:.1f} (in process); self-verification {3 * sv['problems'] / sv_s:.1f}")

    dis = [(r, v, m) for r, v, m in zip(rows, ours, mv, strict=True) if v.equivalent != m]
    random.Random(args.seed).shuffle(dis)
    with open(args.out, "w") as f:
        for (pid, key, text, ref), v, m in dis[: args.sample]:
            f.write(json.dumps({"id": pid, "conversation": key, "final": text, "reference": ref,
                                "ours": v.status, "reason": v.reason, "extracted": v.candidate,
                                "math_verify": m}) + "\n")
    print(f"{len(dis)} disagreements; {min(len(dis), args.sample)} sampled to {args.out}")


if __name__ == "__main__":
    main()
