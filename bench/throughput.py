"""Decode throughput: one attempt at a time (the old path) against the batched slot decoder, one run.

The same problems (half CHAMP, half generated word problems) are attempted at one decode budget:

1. `one-at-a-time`: prefill, then `decode_sequence` below (one sequence, one token per model
   call, PyTorch's default MKL path) for each problem in turn: the engine before batching, kept
   here as this bench's baseline, not a path of the product;
2. `batched B=...`: `flywheel.decode.BatchDecoder` with B slots (continuous batching, oneDNN
   linears, per-slot attention), problems prefilled as they take a slot;
3. the same with `--dtype bfloat16` engines where asked (`--bf16`), with their answers compared to
   float32's at the same B: how many problems get the same extracted answer, and how many each
   dtype answers correctly (the project's verifier against the problem's reference).

Printed per configuration: decode tokens/s, wall per pass (prefill included), RSS after the pass
and the process's peak, and the share of this machine's limits measured in the same run: weight
bytes read per second against measured memory bandwidth (what bounds small B), and FLOP/s
against measured oneDNN matmul FLOP/s (what bounds large B). Greedy decoding; every attempt
stops at its stop rule, EOS or the budget, so token counts can differ slightly between paths
(their bits differ: see BENCHMARKS.md) — tokens/s is the figure compared.

    python bench/throughput.py                                  # 32 problems, budget 48, B = 4 8 16 32
    python bench/throughput.py --problems 32 --budget 64 --slots 4 8 16 32 --bf16 --json
    python bench/throughput.py --llama-cpp /tmp/lcpp-venv/bin/python   # + llama.cpp as the competitor

`--llama-cpp PYTHON` names an interpreter that has `llama-cpp-python` (a competitor only, never a
dependency of the product: build it in a separate venv with `pip install llama-cpp-python`).
It decodes the same prompts from the same packaged GGUF file (Q4_K_M: 4-bit weights, where our
engine runs the dequantized fp32 weights) with 2 threads, greedy: one sequence at a time, then
batched at each `--slots` B (one llama_context with B sequences, one llama_decode per step with a
token per active sequence, continuous refill: its batch API, the fair anchor for batched decoding).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.append(str(Path(__file__).resolve().parent))  # procmem, after the packages

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from procmem import release_free_memory, status_kb  # noqa: E402

from flywheel import config  # noqa: E402
from flywheel.decode import BatchDecoder, DecodeRequest  # noqa: E402
from flywheel.engine import Engine, EngineSettings  # noqa: E402
from flywheel.problemsets import Problem  # noqa: E402
from flywheel.prompts import plain_prompt  # noqa: E402


def problems(n: int) -> list[Problem]:
    from flywheel.problemsets import load_champ, load_problem_set

    champ = load_champ()[: n - n // 2]
    generated = load_problem_set(f"gen:all?n={max(1, n // 20 + 1)}&seed=7").problems[: n // 2]
    return champ + generated


def machine_limits(dtype: torch.dtype) -> dict[str, float]:
    """Memory bandwidth (large copy) and oneDNN matmul FLOP/s, measured now on this machine."""
    src = torch.ones(256 * 2**20 // 4)   # 256 MiB
    dst = torch.empty_like(src)
    dst.copy_(src)
    t = time.perf_counter()
    for _ in range(5):
        dst.copy_(src)
    bandwidth = 2 * src.numel() * 4 * 5 / (time.perf_counter() - t)     # read + write bytes/s
    w = torch.randn(4096, 2048).to(dtype).to_mkldnn()
    x = torch.randn(256, 2048).to(dtype)
    torch._C._nn.mkldnn_linear(x.to_mkldnn(), w, None)
    t = time.perf_counter()
    for _ in range(5):
        torch._C._nn.mkldnn_linear(x.to_mkldnn(), w, None)
    flops = 2 * 256 * 2048 * 4096 * 5 / (time.perf_counter() - t)
    return {"memory_bytes_per_s": bandwidth, "matmul_flop_per_s": flops}


def decode_sequence(engine: Engine, cache: Any, logits: Any, budget: int, stop: Any) -> list[int]:
    """Greedy tokens of one sequence, one model call per token (`Engine.decode_one_token`, the MKL path): the engine as
    it was before batching. Kept here as the baseline this bench measures; the product decodes in slots."""
    produced: list[int] = []
    while len(produced) < budget:
        token = engine.pick_tokens(logits[None], [0.0], [None], [produced])[0]
        produced.append(token)
        if token in engine.eos_ids or stop.should_stop(engine, produced):
            break
        logits = engine.decode_one_token(cache, token)
    return produced


def one_at_a_time(engine: Engine, texts: list[str], budget: int) -> dict[str, Any]:
    from flywheel.attempt import SolveStop

    tokens, decode_s = 0, 0.0
    start = time.perf_counter()
    for text in texts:
        cache, logits = engine.prefill(engine.encode(plain_prompt(text)))
        t = time.perf_counter()
        tokens += len(decode_sequence(engine, cache, logits[-1], budget, SolveStop()))
        decode_s += time.perf_counter() - t
    return {"tokens": tokens, "decode_s": decode_s, "wall_s": time.perf_counter() - start, "steps": tokens}


def batched(engine: Engine, texts: list[str], budget: int, slots: int) -> dict[str, Any]:
    """Decode every text on `slots` slots; also returns each problem's extracted answer, in input order."""
    from flywheel.attempt import SolveStop
    from verifiers import answer_in_output

    def requests() -> Any:
        for i, text in enumerate(texts):
            cache, logits = engine.prefill(engine.encode(plain_prompt(text)))
            yield DecodeRequest(cache, logits[-1], budget, stop=SolveStop(), tag=i)

    decoder = BatchDecoder(engine, slots)
    start = time.perf_counter()
    outs = list(decoder.run(requests()))
    wall = time.perf_counter() - start
    answers: list[str | None] = [None] * len(texts)
    produced: list[list[int]] = [[] for _ in texts]
    for o in outs:  # extracted after timing: not part of the decode figures
        answers[o.tag], produced[o.tag] = answer_in_output(engine.decode_text(o.tokens), "solve"), o.tokens
    return {"tokens": sum(len(o.tokens) for o in outs), "decode_s": decoder.model_seconds, "wall_s": wall,
            "steps": decoder.steps, "answers": answers,
            # every problem's tokens in input order: equal across B for one dtype (slot bits ignore B)
            "tokens_sha256": hashlib.sha256(json.dumps(produced).encode()).hexdigest()}


def compare_answers(items: list[Problem], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per B measured in both dtypes: same extracted answer, and correct answers of each (verifier vs reference)."""
    by = {(r["dtype"], r["slots"]): r["answers"] for r in rows if r.get("answers") is not None and r["weights"] == "fp32"}
    out = []
    for (dtype, slots), bf16 in sorted(by.items(), key=lambda kv: kv[0][1]):
        fp32 = by.get(("float32", slots))
        if dtype != "bfloat16" or fp32 is None:
            continue
        correct = {name: sum(p.check(a).equivalent for p, a in zip(items, ans, strict=True))
                   for name, ans in (("float32", fp32), ("bfloat16", bf16))}
        out.append({"slots": slots, "problems": len(items),
                    "same_answer": sum(a == b for a, b in zip(fp32, bf16, strict=True)),
                    "answered_float32": sum(a is not None for a in fp32),
                    "answered_bfloat16": sum(a is not None for a in bf16),
                    "correct_float32": correct["float32"], "correct_bfloat16": correct["bfloat16"]})
    return out


_LLAMA_CPP = r"""
import json, sys, time
from llama_cpp import Llama
args = json.loads(sys.stdin.read())
llm = Llama(model_path=args["gguf"], n_ctx=2048, n_threads=args["threads"], n_threads_batch=args["threads"],
            verbose=False, seed=0)
tokens = decode_s = 0.0
start = time.perf_counter()
for prompt in args["prompts"]:
    ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.reset()
    llm.eval(ids)                       # prefill
    t = time.perf_counter()
    for _ in range(args["budget"]):
        tok = llm.sample(temp=0.0)
        tokens += 1
        if tok == llm.token_eos():
            break
        llm.eval([tok])
    decode_s += time.perf_counter() - t
print(json.dumps({"tokens": tokens, "decode_s": decode_s, "wall_s": time.perf_counter() - start}))
"""


# Batched: one llama_context with `slots` sequences (n_seq_max), continuous batching as ours does:
# every step is one llama_decode of one token per active sequence (a llama_batch with one
# sequence id per row); a finished sequence's cells are cleared and the next prompt is prefilled
# into its sequence id. Greedy (argmax of each row's logits), stops at EOS/EOT or the budget.
_LLAMA_CPP_BATCHED = r"""
import json, sys, time, ctypes
import numpy as np
import llama_cpp.llama_cpp as L
from llama_cpp import Llama
args = json.loads(sys.stdin.read())
S, budget, ctx_per = args["slots"], args["budget"], args["ctx_per_seq"]
llm = Llama(model_path=args["gguf"], n_ctx=256, n_threads=args["threads"], n_threads_batch=args["threads"], verbose=False)
model = llm._model.model
p = L.llama_context_default_params()
p.n_ctx = S * ctx_per; p.n_batch = max(512, ctx_per); p.n_ubatch = p.n_batch; p.n_seq_max = S
p.n_threads = p.n_threads_batch = args["threads"]
ctx = L.llama_init_from_model(model, p)
mem = L.llama_get_memory(ctx)
vocab = L.llama_model_get_vocab(model)
n_vocab = L.llama_vocab_n_tokens(vocab)
eos = {L.llama_vocab_eos(vocab), L.llama_vocab_eot(vocab)}
batch = L.llama_batch_init(max(p.n_batch, S), 0, 1)
def decode(items):   # items: (token, pos, seq, want_logits)
    batch.n_tokens = len(items)
    for i, (t, pos, s, want) in enumerate(items):
        batch.token[i] = t; batch.pos[i] = pos; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = s; batch.logits[i] = want
    rc = L.llama_decode(ctx, batch)
    assert rc == 0, rc
def logits(i):
    return np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
prompts = [llm.tokenize(t.encode(), add_bos=True, special=False) for t in args["prompts"]]
queue = list(range(len(prompts)))
active = {}   # seq -> [prompt index, pos, tokens, next token]
tokens = 0; decode_s = prefill_s = 0.0; steps = 0
start = time.perf_counter()
def admit(seq):
    global prefill_s
    if not queue: return
    k = queue.pop(0); ids = prompts[k]
    L.llama_memory_seq_rm(mem, seq, -1, -1)
    t = time.perf_counter()
    decode([(tok, j, seq, int(j == len(ids) - 1)) for j, tok in enumerate(ids)])
    prefill_s += time.perf_counter() - t
    active[seq] = [k, len(ids), [], int(logits(len(ids) - 1).argmax())]
for s in range(S): admit(s)
while active:
    feed = []
    for s in list(active):
        a = active[s]
        tok = a[3]; a[2].append(tok); tokens += 1
        if tok in eos or len(a[2]) >= budget:
            del active[s]; admit(s); continue
        feed.append((tok, a[1], s, 1)); a[1] += 1
    if not feed: continue
    t = time.perf_counter()
    decode(feed)
    for i, (_, _, s, _) in enumerate(feed):
        active[s][3] = int(logits(i).argmax())
    decode_s += time.perf_counter() - t; steps += 1
print(json.dumps({"tokens": tokens, "decode_s": decode_s, "prefill_s": prefill_s, "steps": steps,
                  "wall_s": time.perf_counter() - start, "slots": S}))
"""


def llama_cpp(python: str, model: str, texts: list[str], budget: int, slots: int | None = None) -> dict[str, Any]:
    """The competitor in its own interpreter: same GGUF, same prompts, our thread count; one sequence at a
    time (`slots` None) or `slots` sequences batched per llama_decode."""
    import subprocess
    import tempfile

    from flywheel.modelzoo import PACKAGED

    prompts = [plain_prompt(t) for t in texts]
    with tempfile.TemporaryDirectory() as scratch:
        gguf = PACKAGED[model].locate_gguf(Path(scratch))
        payload = json.dumps({"gguf": str(gguf), "budget": budget, "threads": config.DEFAULT_THREADS,
                              "prompts": prompts, "slots": slots or 1, "ctx_per_seq": 512})
        script = _LLAMA_CPP if slots is None else _LLAMA_CPP_BATCHED
        proc = subprocess.run([python, "-c", script], input=payload, capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out.setdefault("steps", out["tokens"])
    return out


def weight_bytes(engine: Engine) -> int:
    """Bytes of weights the model holds: parameters plus the kernel's packed blocks (buffers)."""
    return sum(t.numel() * t.element_size() for t in [*engine.model.parameters(), *engine.model.buffers()])


def step_bytes(engine: Engine) -> int:
    """Weight bytes one decode step reads: every weight, less the input embedding where the output
    projection runs on the kernel's blocks (then the fp32 embedding is only looked up, a row a token)."""
    embedding = engine.model.get_input_embeddings().weight
    head = engine.model.get_output_embeddings()
    looked_up = embedding.numel() * embedding.element_size() if hasattr(head, "codes") else 0
    return weight_bytes(engine) - looked_up


def measure(engine: Engine, texts: list[str], args: argparse.Namespace, limits: dict[str, float],
            weights: str, dtype: str, slots: int | None) -> dict[str, Any]:
    """One configuration's decode figures (a row of the JSON)."""
    wbytes, params = weight_bytes(engine), sum(p.numel() for p in engine.model.parameters())
    read = step_bytes(engine)
    params += sum(m.in_features * m.out_features for m in engine.model.modules() if hasattr(m, "codes"))
    release_free_memory()
    out = one_at_a_time(engine, texts, args.budget) if slots is None else batched(engine, texts, args.budget, slots)
    tps = out["tokens"] / out["decode_s"]
    name = "one-at-a-time" if slots is None else f"batched B={slots}"
    return {"config": name, "weights": weights, "dtype": dtype, "slots": slots, **out, "tokens_per_s": tps,
            "tok_s": tps, "rss_mib": status_kb("VmRSS") / 1024, "peak_rss_mib": status_kb("VmHWM") / 1024,
            "weight_mib": wbytes / 2**20, "step_read_mib": read / 2**20,
            # every step reads every weight it uses once; every token costs ~2 FLOP per linear weight
            "bandwidth_share": read * out["steps"] / out["decode_s"] / limits["memory_bytes_per_s"],
            "flops_share": 2 * params * out["tokens"] / out["decode_s"] / limits["matmul_flop_per_s"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--problems", type=int, default=32)
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    ap.add_argument("--weights", default="fp32,default",
                    help="comma-separated weights modes to compare in this run (fp32, q-f32a, q-i8a, default)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="also time one problem at a time, one token per model call (fp32 weights: the pre-batching path)")
    ap.add_argument("--bf16", action="store_true", help="also measure bfloat16 engines (opt-in dtype, fp32 weights)")
    ap.add_argument("--llama-cpp", metavar="PYTHON", default=None,
                    help="an interpreter with llama-cpp-python: add llama.cpp (same GGUF) as the competitor")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    items = problems(args.problems)
    texts = [p.text for p in items]
    rows: list[dict[str, Any]] = []
    from flywheel.decode import onednn_dtype_problem

    bf16_problem = onednn_dtype_problem(torch.bfloat16) if args.bf16 else None
    if bf16_problem and not args.json:
        print(f"bfloat16 not measured: this CPU cannot run it in the batched step ({bf16_problem})", flush=True)
    engines = [(config.weights_name(w.strip()), "float32") for w in args.weights.split(",") if w.strip()]
    engines += [("fp32", "bfloat16")] if args.bf16 and not bf16_problem else []
    limits = machine_limits(torch.float32)
    measured: set[tuple[str, str]] = set()
    for asked, dtype in engines:
        resolved = config.resolve_weights(asked)
        if (resolved, dtype) in measured:   # `default` naming a mode already measured in this run
            continue
        engine = Engine.load(args.model, EngineSettings(dtype=dtype, weights=asked), progress=False)  # type: ignore[arg-type]
        weights = engine.settings.weights
        if (weights, dtype) in measured:    # fell back to fp32 (a model without blocks): measured already
            del engine
            continue
        measured.add((weights, dtype))
        label = f"{asked} ({weights})" if asked != weights else weights
        configs = [None] if args.one_at_a_time and weights == "fp32" and dtype == "float32" else []
        for slots in [*configs, *args.slots]:
            row = measure(engine, texts, args, limits, weights, dtype, slots)
            rows.append(row)
            if not args.json:
                print(f"{row['config']:>16} {label:>16} {dtype:>8}: {row['tokens']:>5} tok in {row['decode_s']:6.1f} s "
                      f"decode ({row['tok_s']:6.1f} tok/s), pass {row['wall_s']:6.1f} s, weights {row['weight_mib']:.0f} MiB "
                      f"({row['step_read_mib']:.0f} read a step), "
                      f"RSS {row['rss_mib']:.0f} MiB (peak {row['peak_rss_mib']:.0f}), {row['bandwidth_share']:.0%} of "
                      f"memory bandwidth, {row['flops_share']:.0%} of oneDNN fp32 matmul FLOP/s", flush=True)
        del engine
    if args.llama_cpp:
        for slots in args.slots:
            out = llama_cpp(args.llama_cpp, args.model, texts, args.budget, None if slots == 1 else slots)
            name = "llama.cpp" if slots == 1 else f"llama.cpp B={slots}"
            row = {"config": name, "weights": "llama.cpp", "dtype": "gguf", "slots": slots, **out,
                   "tokens_per_s": out["tokens"] / out["decode_s"], "tok_s": out["tokens"] / out["decode_s"]}
            rows.append(row)
            if not args.json:
                print(f"{name:>16} {'llama.cpp':>16} {'gguf':>8}: {out['tokens']:>5.0f} tok in {out['decode_s']:6.1f} s "
                      f"decode ({row['tok_s']:6.1f} tok/s), pass {out['wall_s']:6.1f} s (separate process)", flush=True)
    by = {(r["weights"], r["dtype"], r["slots"]): r["tok_s"] for r in rows}
    ratios = []
    names = sorted({r["weights"] for r in rows if r["weights"] not in ("fp32", "llama.cpp")})
    for slots in args.slots:
        base, theirs = by.get(("fp32", "float32", slots)), by.get(("llama.cpp", "gguf", slots))
        for w in names:
            ours = by.get((w, "float32", slots))
            if ours is None:
                continue
            ratios.append({"weights": w, "slots": slots, "vs_fp32": ours / base if base else None,
                           "vs_llama_cpp": ours / theirs if theirs else None})
    summary = {"model": args.model, "problems": len(texts), "budget": args.budget, "machine": limits,
               "cpu": _cpu(), "rows": rows, "ratios": ratios,
               "bf16_answers": compare_answers(items, rows), "bf16_unsupported": bf16_problem}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"machine: {_cpu()}; {limits['memory_bytes_per_s'] / 1e9:.1f} GB/s copy, "
              f"{limits['matmul_flop_per_s'] / 1e9:.0f} GFLOP/s oneDNN fp32")
        for r in ratios:
            vs_l = f", {r['vs_llama_cpp']:.2f}x llama.cpp" if r["vs_llama_cpp"] else ""
            vs_f = f"{r['vs_fp32']:.2f}x fp32" if r["vs_fp32"] else "fp32 not measured"
            print(f"B={r['slots']}: {r['weights']} {by[(r['weights'], 'float32', r['slots'])]:.1f} tok/s = {vs_f}{vs_l}")
        for c in summary["bf16_answers"]:
            print(f"B={c['slots']}: bfloat16 vs float32 same answer on {c['same_answer']}/{c['problems']} problems; "
                  f"correct: float32 {c['correct_float32']}, bfloat16 {c['correct_bfloat16']}")
    return 0


def _cpu() -> str:
    from flywheel.engine import device_name

    return device_name(torch.device("cpu"))


if __name__ == "__main__":
    raise SystemExit(main())
