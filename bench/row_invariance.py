"""Does a row's matmul result depend on what else is in the batch? PyTorch's default CPU path vs oneDNN.

For each weight shape of Gemma 3 270M (hidden 640, MLP 2048, vocab 262,144) one fixed input row
is multiplied inside batches of M rows (M = 1..64) of random neighbours, at different row
indices. Printed per path and shape: whether the row's bits change with its neighbours' values,
with its row index, and the classes of M that give identical bits. This is why the batched
decoder (flywheel/decode.py) runs every linear through oneDNN on at least 2 rows.

    python bench/row_invariance.py            # ~1 minute on 2 cores
    python bench/row_invariance.py --json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from flywheel import config

SHAPES = [(262_144, 640), (2_048, 640), (640, 2_048), (1_024, 640), (256, 640)]
ROWS = (1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64)
Linear = Callable[[torch.Tensor], torch.Tensor]


def paths(weight: torch.Tensor) -> dict[str, Linear]:
    packed = weight.to_mkldnn()
    return {
        "F.linear (MKL, default)": lambda x: torch.nn.functional.linear(x, weight),
        "oneDNN mkldnn_linear": lambda x: torch._C._nn.mkldnn_linear(x.to_mkldnn(), packed, None).to_dense(),
    }


def probe(f: Linear, k: int, row: torch.Tensor) -> dict[str, object]:
    by_m: dict[int, torch.Tensor] = {}
    neighbours = index = True
    for m in ROWS:
        x = torch.randn(m, k)
        x[m - 1] = row
        by_m[m] = f(x)[m - 1]
        again = torch.randn(m, k)
        again[m - 1] = row
        neighbours &= torch.equal(f(again)[m - 1], by_m[m])
        moved = torch.randn(m, k)
        moved[0] = row
        index &= torch.equal(f(moved)[0], by_m[m])
    classes: list[list[int]] = []
    for m, out in by_m.items():
        for cls in classes:
            if torch.equal(by_m[cls[0]], out):
                cls.append(m)
                break
        else:
            classes.append([m])
    return {"neighbour_invariant": neighbours, "index_invariant": index, "row_count_classes": classes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=config.DEFAULT_THREADS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    for n, k in SHAPES:
        weight = torch.randn(n, k)
        row = torch.randn(k)
        for name, f in paths(weight).items():
            r = {"path": name, "shape": [n, k], **probe(f, k, row)}
            results.append(r)
            if not args.json:
                print(f"{name:>24} W {n}x{k}: neighbours {'no effect' if r['neighbour_invariant'] else 'CHANGE BITS'}, "
                      f"row index {'no effect' if r['index_invariant'] else 'CHANGES BITS'}, "
                      f"row counts with equal bits: {r['row_count_classes']}", flush=True)
    if args.json:
        print(json.dumps({"threads": args.threads, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
