"""The decoder over long grafted contexts against short ones, side by side in one run.

Each request's context is a prefix of `--contexts` tokens (worked solutions of the word families,
as a near graft of several members holds, then a held-out question; the shortest is the question
alone), prefilled once and shared by its K sampled attempts (T = 0.7, the pass's seeds), as in a
pass with `--attempts K`. The same number of requests is decoded on `--slots` slots for each
context length, the lengths alternating `--rounds` times; the median tokens/s and ms per step are
compared with the shortest context's: what a long graft costs per step (requests decode their
whole budget, no stop at a newline, so every length does the same work). Every context is decoded
twice or more: its tokens must be identical each time (the bench fails if not).

    .venv/bin/python bench/long_context.py          # the question alone vs 672 vs 1500 tokens, 8 prompts x K=4, B=16
    .venv/bin/python bench/long_context.py --contexts 14 672 --json

JSON keys: `contexts` (per length: `tokens_per_s`, `step_ms`, `step_ratio` to the shortest), `identical`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from flywheel import config  # noqa: E402


def contexts(eng: Any, n: int, length: int) -> list[list[int]]:
    """`n` token prompts of about `length` tokens: worked solutions of the families, then a held-out question."""
    from flywheel.problemsets import load_problem_set

    shots = load_problem_set("gen:all?n=3&seed=1&split=train").problems
    questions = load_problem_set(f"gen:all?n={max(1, n // 10 + 1)}&seed=3&split=heldout").problems[:n]
    out = []
    for i, q in enumerate(questions):
        tail = eng.encode(f"Problem: {q.text}\nSolution:", bos=False)
        body: list[int] = []
        j = i
        while len(body) < length - len(tail) - 1:
            s = shots[j % len(shots)]
            body += eng.encode(f"Problem: {s.text}\nSolution: {s.solution}\nFinal answer: {s.reference}\n\n", bos=False)
            j += 1
        out.append(eng.encode("", bos=True) + body[:max(0, length - len(tail) - 1)] + tail)
    return out


def decode_all(eng: Any, prepared: list[tuple[Any, Any]], attempts: int, budget: int,
               slots: int) -> tuple[float, int, int, str]:
    """Decode every prompt's K sampled attempts; returns (seconds, tokens, steps, sha256 of all tokens)."""
    from flywheel.attempt import SAMPLE_TEMPERATURE
    from flywheel.decode import BatchDecoder, DecodeRequest
    from flywheel.engine import StopRule

    # No stop at a newline: every request decodes its whole budget (or to EOS), so each context
    # length does the same work and its steps carry the same number of slots.
    reqs = [DecodeRequest(cache, logits, budget, stop=StopRule(newline=False), temperature=SAMPLE_TEMPERATURE,
                          seed=config.DEFAULT_SEED + k, tag=(i, k))
            for i, (cache, logits) in enumerate(prepared) for k in range(attempts)]
    decoder = BatchDecoder(eng, slots)
    start = time.perf_counter()
    outs = sorted(decoder.run(reqs), key=lambda o: o.tag)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(json.dumps([[o.tag, o.tokens] for o in outs]).encode()).hexdigest()
    return seconds, sum(len(o.tokens) for o in outs), decoder.steps, digest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--contexts", type=int, nargs="+", default=[14, 672, 1500], help="prompt tokens per request")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--attempts", type=int, default=4, help="sampled attempts sharing each prompt's prefill")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="passes over the context lengths (each decodes all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from flows import runtime

    load = os.getloadavg()[0]
    eng = runtime.engine(args.model)
    lengths = sorted(set(args.contexts))
    prepared: dict[int, list[tuple[Any, Any]]] = {}
    for n in lengths:
        prepared[n] = []
        for ids in contexts(eng, args.prompts, n):
            cache, logits = eng.prefill(ids)
            prepared[n].append((cache, logits[-1].float()))
    decode_all(eng, prepared[lengths[0]][:1], 1, 4, args.slots)   # warm up (oneDNN weight copies)
    runs: dict[int, list[tuple[float, int, int, str]]] = {n: [] for n in lengths}
    for _ in range(max(2, args.rounds)):
        for n in lengths:
            runs[n].append(decode_all(eng, prepared[n], args.attempts, args.budget, args.slots))
    identical = all(len({d for *_, d in rs}) == 1 for rs in runs.values())
    per: dict[str, dict[str, Any]] = {}
    for n, rs in runs.items():
        per[str(n)] = {"prompt_tokens": len(prepared[n][0][0].layers[-1].keys[0, 0]) if n else 0,
                       "tokens_per_s": statistics.median(t / s for s, t, _, _ in rs),
                       "step_ms": statistics.median(1000 * s / steps for s, _, steps, _ in rs),
                       "tokens": rs[0][1], "steps": rs[0][2],
                       "runs_tokens_per_s": [t / s for s, t, _, _ in rs]}
    base = per[str(lengths[0])]["step_ms"]
    for row in per.values():
        row["step_ratio"] = row["step_ms"] / base
    report = {"model": args.model, "prompts": args.prompts, "attempts": args.attempts, "budget": args.budget,
              "slots": args.slots, "rounds": max(2, args.rounds), "contexts": per, "identical": identical,
              "load_average_before": load, "load_average_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.prompts} prompts x K={args.attempts} sampled (T=0.7), budget {args.budget}, B={args.slots}, "
              f"{args.model}, {report['rounds']} rounds")
        for n, row in per.items():
            print(f"  {n:>5}-token contexts: {row['tokens_per_s']:6.1f} tok/s, {row['step_ms']:6.1f} ms/step "
                  f"({row['step_ratio']:.2f}x the {lengths[0]}-token step); runs "
                  + ", ".join(f"{x:.1f}" for x in row["runs_tokens_per_s"]))
        print(f"  tokens identical in every run of a context: {identical}")
        print(f"load average: {load:.2f} before, {report['load_average_after']:.2f} after")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
