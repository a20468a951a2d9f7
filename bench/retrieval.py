"""Retrieval benchmark: route latency (embed + search) and FAISS top-1 at scale, side by side.

For each size N: N synthetic unit 384-d vectors (the MiniLM width); queries are stored vectors
plus tiny noise (exact recurrences). Per query, top-1 by brute-force numpy (the ground truth),
FAISS IndexFlatIP (what the router uses) and an approximate index (IVF or HNSW), with recall@1
against brute force. Route latency = one real MiniLM query embedding + one search.

    python bench/retrieval.py                          # 10k, 100k, 1M
    python bench/retrieval.py --sizes 2000 --queries 50 --approx ivf,hnsw
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

DIM = 384
NOISE = 1e-3  # per-coordinate Gaussian noise on a recurring query; cosine to its source ~0.9998


def synthetic(n: int, seed: int, chunk: int = 100_000) -> np.ndarray:
    """n unit float32 vectors (n, DIM), generated in chunks to bound peak memory."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, chunk):
        block = rng.standard_normal((min(chunk, n - lo), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[lo:lo + len(block)] = block
    return out


def recurring_queries(xb: np.ndarray, nq: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    src = rng.choice(len(xb), size=nq, replace=False)
    q = xb[src] + rng.standard_normal((nq, DIM), dtype=np.float32) * NOISE
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.ascontiguousarray(q, dtype=np.float32), src


def brute_top1(xb: np.ndarray, q: np.ndarray, batch: int = 64) -> np.ndarray:
    """Ground truth: argmax of q @ xb.T, batched so the (batch, N) scores stay ~256 MB at 1M."""
    out = np.empty(len(q), dtype=np.int64)
    for lo in range(0, len(q), batch):
        out[lo:lo + batch] = np.argmax(q[lo:lo + batch] @ xb.T, axis=1)
    return out


def build(kind: str, xb: np.ndarray) -> Any:
    n = len(xb)
    if kind == "flat":
        index = faiss.IndexFlatIP(DIM)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 40
        index.hnsw.efSearch = 64
    elif kind == "ivf":
        nlist = max(16, min(int(4 * np.sqrt(n)), n // 39))  # the usual 4*sqrt(N) lists, >= 39 points each
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
        train = xb[np.random.default_rng(0).choice(n, size=min(n, 40 * nlist), replace=False)]
        index.train(train)
        index.nprobe = 8
    else:
        raise SystemExit(f"unknown index kind {kind!r}")
    index.add(xb)
    return index


def per_query_ms(search: Callable[[np.ndarray], Any], q: np.ndarray, repeats: int) -> float:
    """Median single-query latency in ms (the router searches one problem at a time)."""
    times = []
    for i in range(repeats):
        row = q[i % len(q)][None, :]
        t = time.perf_counter()
        search(row)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def embed_ms(repeats: int) -> float:
    from flywheel.embed import embed

    embed(["warm-up"])
    texts = [f"Solve for x: {i}x + {i + 3} = {5 * i + 1}." for i in range(repeats)]
    times = []
    for t_ in texts:
        t = time.perf_counter()
        embed([t_])
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated N (default 10k,100k,1M)")
    ap.add_argument("--queries", type=int, default=200, help="recurring queries per size (recall@1)")
    ap.add_argument("--repeats", type=int, default=50, help="single-query latency samples")
    ap.add_argument("--approx", default="ivf", help="approximate index kinds: ivf, hnsw or ivf,hnsw")
    ap.add_argument("--no-embed", action="store_true", help="skip the MiniLM embedding timing")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    approx = [k for k in args.approx.split(",") if k]

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), numpy {np.__version__}")
    emb = None if args.no_embed else embed_ms(args.repeats)
    if emb is not None:
        print(f"embed one problem (MiniLM-L6, CPU): {emb:.2f} ms median of {args.repeats}")
    header = f"{'N':>9} {'index':>7} {'build s':>8} {'ms/query':>9} {'route ms':>9} {'recall@1':>9}"
    print(header)
    print("-" * len(header))
    for n in sizes:
        xb = synthetic(n, args.seed)
        q, src = recurring_queries(xb, min(args.queries, n), args.seed)
        truth = brute_top1(xb, q)
        ms = per_query_ms(lambda row, xb=xb: brute_top1(xb, row), q, args.repeats)
        rows = [("numpy", 0.0, ms, 1.0)]  # the ground truth itself
        for kind in ["flat", *approx]:
            t = time.perf_counter()
            index = build(kind, xb)
            built = time.perf_counter() - t
            _, ids = index.search(q, 1)
            recall = float(np.mean(ids[:, 0] == truth))
            rows.append((kind, built, per_query_ms(lambda row, ix=index: ix.search(row, 1), q, args.repeats), recall))
            del index
        for kind, built, ms, recall in rows:
            route = f"{emb + ms:9.2f}" if emb is not None else f"{'-':>9}"
            print(f"{n:>9,} {kind:>7} {built:8.1f} {ms:9.3f} {route} {recall:9.4f}")
        print(f"{'':>9} (recurrence found its own source: {float(np.mean(truth == src)):.4f} of {len(q)} queries)")
        del xb, q, truth


if __name__ == "__main__":
    main()
