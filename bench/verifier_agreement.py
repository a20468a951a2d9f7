"""Verifier benchmark on CHAMP: self-verification, and agreement with Math-Verify on the stored
model conversations' final answers, with checks per second for both, measured in one run.

    .venv/bin/python bench/verifier_agreement.py                   # 0-Shot conversations of all 4 models
    .venv/bin/python bench/verifier_agreement.py --settings all    # all 18 prompt settings (slow)

Math-Verify is a dev-only comparison (`pip install math-verify`); the verifier never imports it.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
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
        counts["self_" + check(p.answer, p.answer, config=cfg).status] += 1
        counts["self_text_" + check(p.answer, p.answer, "text", config=cfg).status] += 1
        counts["last_step_" + check(p.solution.steps[-1].text, p.answer, config=cfg).status] += 1
    return dict(sorted(counts.items()))


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
    args = ap.parse_args()
    cfg = VerifierConfig()
    ds = champ_dataset.load("v0")
    check("1", "1", config=cfg)  # start the worker outside the timed region

    t0 = time.perf_counter()
    sv = self_verification(ds, cfg)
    sv_s = time.perf_counter() - t0
    print("CHAMP self-verification (270 reference answers):")
    for k, v in sv.items():
        print(f"  {k:28s} {v}")

    settings = None if args.settings == "all" else args.settings.split(",")
    rows = final_answers(ds, settings)
    t0 = time.perf_counter()
    ours = [check(text, ref, config=cfg) for _, _, text, ref in rows]
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
