"""Row invariance on a real model's linear shapes: a row's bytes never depend on its batch.

`--weights q-i8a,q-f32a` checks the qgemm kernel over the model's GGUF blocks; `--weights fp32` checks the
oneDNN linear the fp32 path runs (M >= 2, as the batched decoder pads: oneDNN takes a GEMV path for one row)
and reports PyTorch's default `F.linear` (MKL) beside it, which is not invariant: why the fp32 path runs oneDNN.

For every distinct linear (N, K, block type) of the model's prepared GGUF blocks, in every asked weights
mode: 64 random activation rows are computed one at a time (the reference bytes), then in batches of every
M = 1..64 taken from the start and from the end of the 64 (so every row sits at every position some M
gives it), on 1 and on 2 threads, and once more (repeatability). Every comparison is bytes-equal or the
run says which shape, mode, M, offset and thread count differed. The last line of `--json` holds
`all_equal`.

    python bench/row_invariance.py --model qwen2.5-coder-0.5b --weights q-i8a,q-f32a --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from flywheel import config, kernels, modelzoo
from flywheel.kernels import blocks as kb
from flywheel.kernels import prepared

ROWS = 64


Linear = Callable[[torch.Tensor], torch.Tensor]


def kernel_linear(p: kb.Packed, mode: str, isa: str) -> Linear:
    return lambda x: kernels.qlinear(x.contiguous(), p, None, mode=mode, isa=isa)


def fp32_linears(p: kb.Packed) -> dict[str, Linear]:
    weight = kb.dequantize_packed(p)
    packed = weight.to_mkldnn()
    return {"fp32-onednn": lambda x: torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), packed, None).to_dense(),
            "fp32-F.linear": lambda x: torch.nn.functional.linear(x.contiguous(), weight)}


def check_shape(p: kb.Packed, run: Linear, mode: str, isa: str, seed: int, *, min_m: int = 1) -> dict[str, Any]:
    """Every M, offset and thread count of one linear against its rows computed alone (in `min_m`-row
    batches padded with the row's neighbours where `min_m` > 1: the decoder's dummy rows)."""
    x = torch.randn(ROWS, p.k, generator=torch.Generator().manual_seed(seed))
    pad = torch.zeros(min_m - 1, p.k)   # the decoder's dummy rows where a path needs more than one

    def alone_rows() -> torch.Tensor:
        return torch.cat([run(torch.cat([x[i:i + 1], pad]))[:1] for i in range(ROWS)])

    alone = alone_rows()
    compared, differed = 0, []
    saved = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for m in range(min_m, ROWS + 1):
                for start in sorted({0, ROWS - m}):
                    compared += 1
                    if not torch.equal(run(x[start:start + m]), alone[start:start + m]):
                        differed.append({"m": m, "start": start, "threads": threads})
    finally:
        torch.set_num_threads(saved)
    repeat_equal = torch.equal(alone_rows(), alone)
    return {"n": p.n, "k": p.k, "type": p.type_name, "mode": mode, "isa": isa, "batches": compared,
            "differed": differed, "repeat_equal": repeat_equal, "equal": not differed and repeat_equal}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=config.DEFAULT_MODEL)
    ap.add_argument("--weights", default="q-i8a,q-f32a", help="kernel modes, comma-separated (default names one)")
    ap.add_argument("--isa", default=None, help="a variant to run (default: the best this CPU has)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    why = kernels.problem()
    if why:
        print(why, file=sys.stderr)
        return 2
    model_dir = modelzoo.prepare(args.model)
    prepared.ensure_blocks(args.model, model_dir)
    packed, sha = prepared.read_blocks(model_dir)
    shapes: dict[tuple[int, int, str], kb.Packed] = {}
    for p in packed.values():
        shapes.setdefault((p.n, p.k, p.type_name), p)
    modes = [config.resolve_weights(config.weights_name(w.strip())) for w in args.weights.split(",") if w.strip()]
    isa = args.isa or kernels.variant()
    results = []
    started = time.perf_counter()
    for mode in modes:
        for i, (_, p) in enumerate(sorted(shapes.items())):
            if mode == "fp32":
                fp32 = fp32_linears(p)
                r = check_shape(p, fp32["fp32-onednn"], "fp32-onednn", "onednn", seed=i, min_m=2)
                mkl = check_shape(p, fp32["fp32-F.linear"], "fp32-F.linear", "mkl", seed=i)
                r["f_linear_invariant"] = mkl["equal"]   # information: MKL's default path is not invariant
            else:
                r = check_shape(p, kernel_linear(p, mode, isa), mode, isa, seed=i)
            results.append(r)
            if not args.json:
                print(f"{args.model} {mode} {isa} N={r['n']} K={r['k']} {r['type']}: {r['batches']} batches, "
                      f"{'equal' if r['equal'] else 'DIFFER ' + json.dumps(r['differed'][:3])}", flush=True)
    summary = {"model": args.model, "blocks_sha256": sha, "modes": modes, "isa": isa, "rows": ROWS,
               "threads": [1, 2], "shapes": len(shapes), "checks": len(results),
               "batches": sum(r["batches"] for r in results), "seconds": round(time.perf_counter() - started, 1),
               "results": results, "all_equal": all(r["equal"] for r in results)}
    print(json.dumps(summary) if args.json else
          f"{args.model}: {summary['batches']} batches over {len(shapes)} shapes x {len(modes)} modes on {isa}: "
          f"all_equal={summary['all_equal']}")
    return 0 if summary["all_equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
