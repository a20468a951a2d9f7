"""The decoder over long grafted contexts: per-slot attention on one core vs split over two, same run.

Each request's context is a ~`--context`-token prefix (curated worked solutions of the word
families, as a 5-member near graft holds, then a held-out question), prefilled once and shared
by its K sampled attempts (T = 0.7, the pass's seeds), as in a pass with `--attempts K`. The same
requests are decoded on `--slots` slots with the slot attention on the calling thread only
(`serial`) and split between two threads (`split`, `flywheel.decode._split_slots`), alternating
`--rounds` times; the tokens of every request must be identical in both (where a slot's call
runs never changes its bits), and the bench fails if they are not.

    .venv/bin/python bench/long_context.py                  # 672-token contexts, 8 prompts x K=4, B=16
    .venv/bin/python bench/long_context.py --context 1500 --json

JSON keys: `serial_tokens_per_s`, `split_tokens_per_s`, `speedup`, `identical`, `rounds`.
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
    """`n` token prompts of `length` tokens: worked solutions of the families, then one held-out question each."""
    from flywheel.problemsets import load_problem_set

    shots = load_problem_set("gen:all?n=3&seed=1&split=train").problems
    questions = load_problem_set(f"gen:all?n={max(1, n // 10 + 1)}&seed=3&split=heldout").problems[:n]
    out = []
    for i, q in enumerate(questions):
        body: list[int] = []
        j = i
        while len(body) < length:
            s = shots[j % len(shots)]
            body += eng.encode(f"Problem: {s.text}\nSolution: {s.solution}\nFinal answer: {s.reference}\n\n", bos=False)
            j += 1
        tail = eng.encode(f"Problem: {q.text}\nSolution:", bos=False)
        out.append(eng.encode("", bos=True) + body[:length - len(tail) - 1] + tail)
    return out


def decode_all(eng: Any, prepared: list[tuple[Any, Any]], attempts: int, budget: int, slots: int,
               split: bool) -> tuple[float, int, str]:
    """Decode every prompt's K sampled attempts; returns (seconds, tokens, sha256 of all tokens)."""
    from flywheel import decode
    from flywheel.attempt import SAMPLE_TEMPERATURE
    from flywheel.decode import BatchDecoder, DecodeRequest

    saved = decode.PARALLEL_ATTENTION_KEYS
    decode.PARALLEL_ATTENTION_KEYS = saved if split else sys.maxsize
    try:
        reqs = [DecodeRequest(cache, logits, budget, temperature=SAMPLE_TEMPERATURE, seed=config.DEFAULT_SEED + k,
                              tag=(i, k)) for i, (cache, logits) in enumerate(prepared) for k in range(attempts)]
        start = time.perf_counter()
        outs = sorted(BatchDecoder(eng, slots).run(reqs), key=lambda o: o.tag)
        seconds = time.perf_counter() - start
    finally:
        decode.PARALLEL_ATTENTION_KEYS = saved
    digest = hashlib.sha256(json.dumps([[o.tag, o.tokens] for o in outs]).encode()).hexdigest()
    return seconds, sum(len(o.tokens) for o in outs), digest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--context", type=int, default=672, help="prompt tokens per request (the graft + question)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--attempts", type=int, default=4, help="sampled attempts sharing each prompt's prefill")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="serial/split alternations")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from flows import runtime

    load = os.getloadavg()[0]
    eng = runtime.engine(args.model)
    prepared = []
    for ids in contexts(eng, args.prompts, args.context):
        cache, logits = eng.prefill(ids)
        prepared.append((cache, logits[-1].float()))
    decode_all(eng, prepared[:1], 1, 4, args.slots, True)   # warm up (oneDNN weights, pool)
    runs: dict[str, list[tuple[float, int, str]]] = {"serial": [], "split": []}
    for _ in range(args.rounds):
        for mode in ("serial", "split"):
            runs[mode].append(decode_all(eng, prepared, args.attempts, args.budget, args.slots, mode == "split"))
    digests = {d for rs in runs.values() for _, _, d in rs}
    rate = {m: statistics.median(t / s for s, t, _ in rs) for m, rs in runs.items()}
    report = {"model": args.model, "context": args.context, "prompts": args.prompts, "attempts": args.attempts,
              "budget": args.budget, "slots": args.slots, "rounds": args.rounds,
              "serial_tokens_per_s": rate["serial"], "split_tokens_per_s": rate["split"],
              "speedup": rate["split"] / rate["serial"], "identical": len(digests) == 1,
              "tokens": runs["split"][0][1], "runs": runs,
              "load_average_before": load, "load_average_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.prompts} prompts x K={args.attempts} sampled (T=0.7), {args.context}-token contexts, "
              f"budget {args.budget}, B={args.slots}, {args.model}")
        for m in ("serial", "split"):
            print(f"  {m:6s}: {rate[m]:6.1f} tok/s  (" + ", ".join(f"{t / s:.1f}" for s, t, _ in runs[m]) + ")")
        print(f"  split / serial: {report['speedup']:.2f}x; tokens identical in every run: {report['identical']}")
        print(f"load average: {load:.2f} before, {report['load_average_after']:.2f} after")
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
