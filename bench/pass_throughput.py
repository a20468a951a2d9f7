"""Pass throughput where users feel it: the decoder alone against a real `flywheel run`, one run, same problems.

Setup: a fresh library seeded with one curated sibling per generated word-problem family (the
near grafts a pass routes to, ~10 artifacts), then the same held-out problems twice:

1. `decoder alone`: each problem routed and prepared exactly as a pass does (graft restore and
   its prompt's tokens), all prepared up front, then its K sampled attempts (T = 0.7, the pass's
   seeds) decoded on `--slots` slots by `BatchDecoder`, which prefills each prompt in its steps.
   Decode tokens / decoder wall: the decoder at its own speed on real work (long grafted
   contexts, sampled, prompts prefilled beside the others' decode tokens). Run `--decoder-rounds`
   times (default 2) and the last round is the figure: the first pays oneDNN's one-off cost of
   a primitive per new row count (prompt chunks make many), which the pass after it, in the same
   process, no longer pays. Every round's tokens/s is in `decoder.rounds_tokens_per_s`.
2. `real pass`: `flows.flywheel_run` on the same problems and library (Prefect flow on its
   temporary server, routing, grafts, verification, deposits, catalog writes): decode tokens /
   flow wall, and where the time went (`breakdown`, from the run's own phase clock). The
   temporary server is started as `flywheel run` starts it: at process start, booting while
   the model loads (`flows.server.start_early`); the flow call pays for any of it not done yet.
3. `command`: the same pass as a user types it, `flywheel run ... --json` in a fresh process on
   a copy of the library as it was before (2): imports, model load, the server, the pass.
   Decode tokens / the command's whole wall.

Also, on the same step logits: the sampler's cost per step, the previous one (softmax +
multinomial per row) beside the batched one (`flywheel.sampling`).

    .venv/bin/python bench/pass_throughput.py                       # 20 problems, K=4, budget 64, B=16 (< 5 min)
    .venv/bin/python bench/pass_throughput.py --near-members 5        # ~700-token composite grafts
    .venv/bin/python bench/pass_throughput.py --per-family 4 --slots 32 --json

JSON keys: `decoder_tokens_per_s`, `pass_tokens_per_s`, `pass_efficiency` (their ratio),
`breakdown` (seconds per phase of the pass), `command_tokens_per_s`, `command_efficiency`,
`decoder` (with `rounds_tokens_per_s`, `rounds_identical`: every round decoded the same tokens),
`pass`, `command`, `sampler`, `setup`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from flywheel import config  # noqa: E402


def seed_library(root: Path, model: str) -> dict[str, Any]:
    """Deposit one curated sibling per family (the near grafts); returns what was deposited."""
    from flows import runtime
    from flows.demo import family_seeds
    from flywheel.router import RouterConfig

    eng = runtime.engine(model)
    lib = runtime.library(str(root), config.database_url(root, None), RouterConfig())
    start = time.perf_counter()
    deps = [lib.deposit(eng, p, p.solution or "", p.reference or "", deposited_by="curator:bench")
            for p in family_seeds()]
    return {"artifacts": len(deps), "graft_tokens": [d.token_count for d in deps],
            "seconds": time.perf_counter() - start}


def decoder_alone(root: Path, model: str, spec: str, attempts: int, budget: int, slots: int,
                  seed: int, members: int, rounds_n: int) -> dict[str, Any]:
    """Route and prepare every problem as a pass does, then decode all its sampled attempts on the slots,
    `rounds_n` times; the figures are the last round's."""
    from flows import runtime
    from flywheel.attempt import SAMPLE_TEMPERATURE, decode_request, prepare_attempt
    from flywheel.decode import BatchDecoder, Prompt
    from flywheel.domain import json_sha256
    from flywheel.problemsets import load_problem_set
    from flywheel.router import RouterConfig

    eng = runtime.engine(model)
    lib = runtime.library(str(root), config.database_url(root, None), RouterConfig(near_members=members))
    problems = load_problem_set(spec).problems
    start = time.perf_counter()
    prepared = []
    for p in problems:
        decision = lib.route(eng, p.text, members=members)
        prepared.append(prepare_attempt(eng, lib, p, route=decision.kind, artifact_sha=decision.artifact_sha))
    prepare_s = time.perf_counter() - start
    rounds, digests = [], []   # tokens/s and the SHA-256 of every attempt's tokens, per round
    for _ in range(rounds_n):
        # A fresh Prompt per problem each round: a Prompt keeps its prefill once fed (the K forks
        # share it), so a reused one would let later rounds skip their prompts' prefill.
        fresh = [replace(pa, prompt=Prompt(pa.prompt.cache, pa.prompt.ids)) if pa.prompt is not None else pa
                 for pa in prepared]
        requests = [decode_request(pa, budget, seed=seed + k, temperature=SAMPLE_TEMPERATURE, tag=(i, k))
                    for i, pa in enumerate(fresh) for k in range(attempts)]
        decoder = BatchDecoder(eng, slots)
        start = time.perf_counter()
        outs = list(decoder.run(requests))
        wall = time.perf_counter() - start
        tokens = sum(len(o.tokens) for o in outs)
        rounds.append(tokens / wall)
        digests.append(json_sha256(sorted([list(o.tag), o.tokens] for o in outs)))
    contexts = [pa.restored_tokens + pa.prefill_tokens for pa in prepared]
    return {"problems": len(problems), "requests": len(requests), "decode_tokens": tokens, "decode_wall_s": wall,
            "tokens_per_s": tokens / wall, "rounds_tokens_per_s": rounds,
            "rounds_identical": len(set(digests)) == 1, "tokens_sha256": digests[-1],
            "step_s": decoder.model_seconds, "pick_s": decoder.pick_seconds,
            "prefill_in_steps_s": decoder.prefill_seconds, "prefill_tokens": decoder.prefill_tokens,
            "admit_s": decoder.admit_seconds, "steps": decoder.steps, "prepare_s": prepare_s,
            "grafted": sum(pa.grafted_artifact_sha is not None for pa in prepared),
            "context_tokens_median": statistics.median(contexts), "context_tokens_max": max(contexts)}


def real_pass(root: Path, model: str, spec: str, attempts: int, budget: int, slots: int,
              seed: int, members: int) -> dict[str, Any]:
    """One `flywheel_run` flow over the same problems; its summary's timing and totals."""
    from flows.run import RunConfig, flywheel_run

    cfg = RunConfig(problems=spec, attempts=attempts, budget=budget, slots=slots, seed=seed, library=str(root),
                    model=model, near_members=members)
    start = time.perf_counter()
    summary = flywheel_run(cfg)
    wall = time.perf_counter() - start
    tokens = summary["totals"]["decode_tokens"]
    return {"decode_tokens": tokens, "wall_s": wall, "flow_wall_s": summary["timing"]["wall_seconds"],
            "tokens_per_s": tokens / wall, "verified": summary["totals"]["verified"],
            "problems": summary["totals"]["problems"], "breakdown": summary["timing"]["breakdown"],
            "routes": sorted({r["route"] for r in summary["results"]})}


def command_pass(root: Path, model: str, spec: str, attempts: int, budget: int, slots: int, seed: int,
                 members: int) -> dict[str, Any]:
    """`flywheel run` as a user types it, in a fresh process: the whole command's wall and its summary."""
    import subprocess

    exe = Path(sys.executable).with_name("flywheel")
    cmd = [str(exe), "--model", model, "--library", str(root), "run", "--problems", spec, "--attempts", str(attempts),
           "--budget", str(budget), "--slots", str(slots), "--seed", str(seed), "--members", str(members), "--json"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"flywheel run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    tokens = summary["totals"]["decode_tokens"]
    return {"decode_tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
            "flow_wall_s": summary["timing"]["wall_seconds"], "verified": summary["totals"]["verified"],
            "command": " ".join(cmd[1:]).replace(str(root), "<library>")}   # no machine path in a result


def sampler_cost(model: str, slots: int, repeats: int = 5) -> dict[str, float]:
    """Milliseconds per step to pick `slots` sampled tokens: per-row softmax + multinomial vs flywheel.sampling."""
    from flows import runtime
    from flywheel.sampling import pick_tokens

    eng = runtime.engine(model)
    _, logits = eng.prefill(eng.encode("Problem: a shop sells pens at 3 dollars each. How much do 7 pens cost?"))
    rows = logits[-1].repeat(slots, 1) + torch.randn(slots, logits.shape[-1], generator=torch.Generator().manual_seed(0))
    gens = [torch.Generator().manual_seed(i) for i in range(slots)]

    def old() -> None:
        for i in range(slots):
            torch.multinomial(torch.softmax(rows[i] / 0.7, dim=-1), 1, generator=gens[i])

    def new() -> None:
        pick_tokens(rows, [0.7] * slots, gens)

    def greedy() -> None:
        pick_tokens(rows, [0.0] * slots, [None] * slots)

    out = {}
    for name, fn in (("softmax_multinomial_ms", old), ("batched_sampled_ms", new), ("batched_greedy_ms", greedy)):
        fn()
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        out[name] = 1000 * (time.perf_counter() - t) / repeats
    out["speedup"] = out["softmax_multinomial_ms"] / out["batched_sampled_ms"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--per-family", type=int, default=2, help="held-out problems per word family (10 families)")
    ap.add_argument("--problem-seed", type=int, default=3)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--near-members", type=int, default=1,
                    help="related solutions grafted together on a near route (5: ~700-token grafts)")
    ap.add_argument("--decoder-rounds", type=int, default=2,
                    help="times the decoder alone runs the requests; the last round is its figure (>= 1)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.decoder_rounds < 1:
        ap.error("--decoder-rounds must be at least 1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    spec = f"gen:all?n={args.per_family}&seed={args.problem_seed}&split=heldout"
    load = os.getloadavg()[0]
    from flows import server

    server.start_early()   # as `flywheel run` does, before its model loads
    with tempfile.TemporaryDirectory(prefix="pass-bench-") as tmp:
        root = Path(tmp) / "library"
        setup = seed_library(root, args.model)
        dec = decoder_alone(root, args.model, spec, args.attempts, args.budget, args.slots, config.DEFAULT_SEED,
                            args.near_members, args.decoder_rounds)
        shutil.copytree(root, Path(tmp) / "library-cli")   # the library as the pass below finds it
        run = real_pass(root, args.model, spec, args.attempts, args.budget, args.slots, config.DEFAULT_SEED,
                        args.near_members)
        cli = command_pass(Path(tmp) / "library-cli", args.model, spec, args.attempts, args.budget, args.slots,
                           config.DEFAULT_SEED, args.near_members)
        sampler = sampler_cost(args.model, args.slots)
    report = {"problems": spec, "attempts": args.attempts, "budget": args.budget, "slots": args.slots,
              "near_members": args.near_members,
              "model": args.model, "decoder_tokens_per_s": dec["tokens_per_s"], "pass_tokens_per_s": run["tokens_per_s"],
              "pass_efficiency": run["tokens_per_s"] / dec["tokens_per_s"], "breakdown": run["breakdown"],
              "command_tokens_per_s": cli["tokens_per_s"],
              "command_efficiency": cli["tokens_per_s"] / dec["tokens_per_s"],
              "decoder": dec, "pass": run, "command": cli, "sampler": sampler, "setup": setup,
              "load_average_before": load, "load_average_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{spec}, K={args.attempts} sampled (T=0.7), budget {args.budget}, B={args.slots}, "
          f"{args.near_members} near member(s), {args.model}")
    print(f"library: {setup['artifacts']} near grafts; requests' context median {dec['context_tokens_median']:.0f} "
          f"tokens (max {dec['context_tokens_max']}), {dec['grafted']}/{dec['problems']} problems grafted")
    print(f"decoder alone : {dec['decode_tokens']:6d} decode tokens in {dec['decode_wall_s']:6.1f} s = "
          f"{dec['tokens_per_s']:6.1f} tok/s (steps {dec['step_s']:.1f} s, picks {dec['pick_s']:.1f} s; "
          f"rounds {', '.join(f'{r:.1f}' for r in dec['rounds_tokens_per_s'])} tok/s)")
    print(f"real pass     : {run['decode_tokens']:6d} decode tokens in {run['wall_s']:6.1f} s = "
          f"{run['tokens_per_s']:6.1f} tok/s, {run['verified']}/{run['problems']} verified")
    print(f"pass efficiency: {report['pass_efficiency']:.2f}")
    print(f"the command   : {cli['decode_tokens']:6d} decode tokens in {cli['wall_s']:6.1f} s = "
          f"{cli['tokens_per_s']:6.1f} tok/s (fresh process: imports, model load, Prefect, the pass; "
          f"efficiency {report['command_efficiency']:.2f})")
    print("where the pass's time went (s; verify and record run beside the decode loop):")
    for name, seconds in run["breakdown"].items():
        print(f"  {name:12s} {seconds:8.2f}")
    print(f"sampler per step of {args.slots} sampled rows: softmax+multinomial {sampler['softmax_multinomial_ms']:.1f} ms, "
          f"batched {sampler['batched_sampled_ms']:.1f} ms ({sampler['speedup']:.1f}x); greedy {sampler['batched_greedy_ms']:.1f} ms")
    print(f"load average: {load:.2f} before, {report['load_average_after']:.2f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
