"""Context widening: a library far larger than the window, one graft resident at a time, byte-exact.

A library is grown on a tiny seeded Gemma-3-style model (sliding-window and full-attention
layers; its window `--window` tokens) to at least `--target-tokens` stored tokens (the reference
figure: 32,768 -> 2,854,766). To fit a 2-core machine, each corpus sequence of `--window` tokens is
prefilled once in `--stride`-token chunks and an artifact is captured after every chunk: the
artifact of tokens [0, n) is exactly what a fresh prefill of those n tokens in that schedule
leaves (a graft of it is checked against one below), so one pass over a sequence deposits
window/stride long artifacts. Each is stored and catalogued through the library (`store.put`,
`catalog.deposit`, marked unverified: they are scale filler, not verified solutions).

Measured side by side in one run:

- at several library sizes: graft the same `--probe-tokens` artifact from the store
  (`Library.load_raw_graft`: hash- and fingerprint-checked; these prefixes are not graft-template text) and record the cache's tensor bytes, the RSS the graft adds (peak and
  held) and the process RSS. Flat resident bytes as the library grows is the claim.
- `--checks` randomly chosen stored artifacts: a fresh prefill of their token ids in their
  recorded schedule must give the header's logits SHA-256, and the next token's logits after a
  graft must equal (SHA-256) those after the fresh prefill.
- artifact bytes per token for the tiny model and for `gemma3-270m` and `smollm2-135m` (a short
  real artifact each), with what lossless zstd buys (plain, and after byte-shuffling the float
  tensors so equal exponent bytes sit together).

    python bench/context.py                                   # 2,854,766 tokens, ~5-10 min on 2 cores
    python bench/context.py --target-tokens 20000 --window 2048 --stride 256 --models tiny --json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zstandard
from procmem import release_free_memory, status_kb  # bench/procmem.py

from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec
from flywheel.engine import Engine, EngineSettings
from flywheel.kv import capture, logits_sha256, parse_artifact
from flywheel.kv.exactness import corpus_ids
from flywheel.library import Library
from flywheel.testing import build_tiny_model

REFERENCE_TOKENS = 2_854_766  # the reference library size
REFERENCE_WINDOW = 32_768     # the reference model's window
REAL_MODELS = ("gemma3-270m", "smollm2-135m")
DEFAULT_LEVELS = (3, 19)


@dataclass
class Deposited:
    sha256: str
    tokens: int
    size_bytes: int


# --- resident memory -----------------------------------------------------------------------------


def graft_resident(engine: Engine, lib: Library, sha: str) -> dict[str, Any]:
    """Graft `sha` from the store; tensor bytes of the cache, RSS the graft adds, process RSS."""
    gc.collect()
    release_free_memory()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS, so the peak is this graft's
        hwm = True
    except OSError:
        hwm = False
    before = status_kb("VmRSS")
    t0 = time.perf_counter()
    g = lib.load_raw_graft(engine, sha)
    seconds = time.perf_counter() - t0
    held = status_kb("VmRSS")
    peak = status_kb("VmHWM") if hwm else None
    tensor_bytes = sum(int(t.nbytes) for layer in g.cache.layers
                       for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if t is not None)
    del g
    gc.collect()
    return {"tensor_bytes": tensor_bytes, "rss_added_peak_kb": None if peak is None else peak - before,
            "rss_added_held_kb": held - before, "process_rss_mb": status_kb("VmRSS") / 1024, "graft_s": seconds}


# --- growing the library -------------------------------------------------------------------------


def deposit_artifact(engine: Engine, lib: Library, ids: list[int], cache: Any, last: Any, seq: int) -> Deposited:
    """Seal the cache as an artifact of `ids`, store it, and catalogue it (unverified filler)."""
    n = len(ids)
    artifact = capture(engine, cache, ids, last, meta={"bench": "context", "sequence": str(seq)})
    data = artifact.to_bytes()
    sha = lib.store.put(data)
    fp = engine.fingerprint
    lib.catalog.deposit(
        ProblemSpec(text=f"context bench: corpus sequence {seq}, tokens [0, {n})", id=f"ctx-{seq}-{n}",
                    source="bench:context"),
        SolutionSpec(text=f"prefix of corpus sequence {seq}", answer=str(n), verdict_status="unchecked",
                     deposited_by="bench:context", unverified=True),
        ArtifactSpec(sha256=sha, fingerprint_digest=fp.digest, fingerprint_json=json.dumps(fp.to_dict()),
                     model_name=fp.model, token_count=n, size_bytes=len(data),
                     logits_sha256=artifact.header.logits_sha256))
    return Deposited(sha, n, len(data))


def sequence_ids(engine: Engine, corpus: list[int], seq: int, window: int) -> list[int]:
    """Window tokens of real text for sequence `seq` (BOS first), each sequence a different span."""
    start = (seq * 7919) % max(1, len(corpus) - window)
    ids = corpus[start:start + window]
    bos = engine.tokenizer.bos_token_id
    return ([bos] + ids[1:]) if bos is not None else ids


def grow(engine: Engine, lib: Library, corpus: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """Deposit artifacts until the library holds `target_tokens`; measure a graft along the way."""
    deposited: list[Deposited] = []
    stored = 0
    probe: Deposited | None = None
    points: list[dict[str, Any]] = []
    marks = [args.target_tokens * (k + 1) // args.points for k in range(args.points)]
    t0 = time.perf_counter()
    prefill_s = 0.0
    seq = 0
    while stored < args.target_tokens:
        ids = sequence_ids(engine, corpus, seq, args.window)
        cache = engine.new_cache()
        for end in range(args.stride, args.window + 1, args.stride):
            t = time.perf_counter()
            cache, last = engine.prefill(ids[end - args.stride:end], cache, chunk=args.stride)
            prefill_s += time.perf_counter() - t
            d = deposit_artifact(engine, lib, ids[:end], cache, last, seq)
            deposited.append(d)
            stored += d.tokens
            if probe is None and d.tokens >= args.probe_tokens:
                probe = d
            if probe is not None and (not points or stored >= marks[0]):
                while marks and stored >= marks[0]:
                    marks.pop(0)
                point = {"library_artifacts": len(deposited), "library_tokens": stored,
                         "library_bytes": sum(x.size_bytes for x in deposited), "probe_tokens": probe.tokens,
                         "probe_bytes": probe.size_bytes, **graft_resident(engine, lib, probe.sha256)}
                points.append(point)
                if not args.json:
                    print(f"  library {stored:>10,} tokens in {len(deposited):>4} artifacts "
                          f"({point['library_bytes'] / 1e6:,.0f} MB): graft of {probe.tokens:,} tokens holds "
                          f"{point['tensor_bytes']:,} tensor bytes, +{point['rss_added_held_kb']:,} kB RSS "
                          f"(peak +{point['rss_added_peak_kb'] or 0:,} kB), process {point['process_rss_mb']:.0f} MB",
                          flush=True)
            if stored >= args.target_tokens:
                break
        seq += 1
    return {"deposited": deposited, "points": points, "grow_s": time.perf_counter() - t0, "prefill_s": prefill_s,
            "sequences": seq}


# --- exactness -----------------------------------------------------------------------------------


def check_exact(engine: Engine, lib: Library, sha: str, probe_token: int) -> dict[str, Any]:
    """Fresh prefill vs header, and graft vs fresh on one more token, both by logits SHA-256."""
    data = lib.store.get(sha)
    assert data is not None
    header = parse_artifact(data, expected_sha256=sha).header
    del data
    fresh_cache, fresh_last = engine.prefill(header.token_ids, chunk=header.prefill_chunk)
    header_equal = logits_sha256(fresh_last.reshape(-1)) == header.logits_sha256
    fresh_next = logits_sha256(engine.forward([probe_token], fresh_cache))
    del fresh_cache
    graft_next = logits_sha256(engine.forward([probe_token], lib.load_raw_graft(engine, sha).cache))
    return {"artifact": sha, "tokens": header.token_count, "header_logits_equal": header_equal,
            "graft_equals_fresh": graft_next == fresh_next, "logits_sha256": graft_next}


# --- bytes per token and compression -------------------------------------------------------------


def shuffled(data: bytes, header_len: int, itemsize: int = 4) -> bytes:
    """The file with its tensor section byte-shuffled (byte k of every float together), as blosc does."""
    body = np.frombuffer(data, dtype=np.uint8, offset=header_len)
    whole = len(body) // itemsize * itemsize
    lanes = body[:whole].reshape(-1, itemsize).T.copy()
    return data[:header_len] + lanes.tobytes() + body[whole:].tobytes()


def compression(data: bytes, levels: tuple[int, ...]) -> dict[str, Any]:
    """zstd ratios (original / compressed) at each level, plain and byte-shuffled, with timings."""
    import struct

    header_len = 8 + struct.unpack("<Q", data[:8])[0]
    shuf = shuffled(data, header_len)
    out: dict[str, Any] = {}
    for level in levels:
        c = zstandard.ZstdCompressor(level=level)
        t = time.perf_counter()
        plain = c.compress(data)
        t_plain = time.perf_counter() - t
        t = time.perf_counter()
        shuffled_size = len(c.compress(shuf))
        assert zstandard.ZstdDecompressor().decompress(plain) == data  # lossless, checked
        out[f"zstd{level}"] = {"bytes": len(plain), "ratio": len(data) / len(plain), "seconds": t_plain,
                               "shuffled_bytes": shuffled_size, "shuffled_ratio": len(data) / shuffled_size,
                               "shuffled_seconds": time.perf_counter() - t}
    return out


def kv_bytes_per_token(data: bytes) -> dict[str, Any]:
    """From an artifact: header bytes, and KV bytes per token below the window and past it."""
    import struct

    art = parse_artifact(data)
    full = sliding = 0
    for i, state in enumerate(art.header.layers):
        per_token = sum(art.tensors[f"layer.{i}.{kv}"].nbytes for kv in ("keys", "values")) // max(1, state.cached_tokens)
        if state.kind == "sliding":
            sliding += per_token
        else:
            full += per_token
    window = min((s.sliding_window for s in art.header.layers if s.sliding_window), default=None)
    return {"header_bytes": 8 + struct.unpack("<Q", data[:8])[0], "kv_bytes_per_token_in_window": full + sliding,
            "kv_bytes_per_token_past_window": full, "sliding_window": window}


def model_row(name: str, data: bytes, tokens: int, levels: tuple[int, ...]) -> dict[str, Any]:
    return {"model": name, "artifact_tokens": tokens, "artifact_bytes": len(data),
            "bytes_per_token": len(data) / tokens, **kv_bytes_per_token(data), "zstd": compression(data, levels)}


def real_model_row(name: str, tokens: int, levels: tuple[int, ...]) -> dict[str, Any]:
    engine = Engine.load(name, progress=False)
    ids = corpus_ids(engine, tokens)
    cache, last = engine.prefill(ids)
    data = capture(engine, cache, ids, last).to_bytes()
    row = model_row(name, data, tokens, levels)
    row["fingerprint"] = engine.fingerprint.digest
    del engine, cache
    gc.collect()
    return row


# --- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    levels = tuple(int(x) for x in args.zstd_levels.split(","))
    with tempfile.TemporaryDirectory(prefix="context-bench-", dir=args.workdir) as tmp:
        root = Path(tmp)
        model_dir = build_tiny_model("gemma3", root / "tiny-gemma3", max_positions=args.window)
        engine = Engine.load(str(model_dir), EngineSettings(prefill_chunk=args.stride), progress=False)
        corpus = corpus_ids(engine, args.window * 8)
        with Library.open(root / "library") as lib:
            grown = grow(engine, lib, corpus, args)
            deposited: list[Deposited] = grown["deposited"]
            rng = random.Random(args.seed)
            picks = rng.sample(deposited, min(args.checks, len(deposited)))
            t = time.perf_counter()
            checks = [check_exact(engine, lib, d.sha256, probe_token=corpus[-1]) for d in picks]
            check_s = time.perf_counter() - t
            from flywheel.report import build_report

            context = build_report(lib.catalog, context_window=args.window).context.to_dict("records")
            largest = max(deposited, key=lambda d: d.tokens)
            largest_data = lib.store.get(largest.sha256)
            assert largest_data is not None
            models = [model_row("tiny-gemma3", largest_data, largest.tokens, levels)]
            largest_resident = graft_resident(engine, lib, largest.sha256)
            disk = sum(f.stat().st_size for f in (root / "library" / "artifacts").rglob("*") if f.is_file())
    for name in args.models.split(","):
        if name and name != "tiny":
            models.append(real_model_row(name, args.real_tokens, levels))
    points = grown["points"]
    tensor = [p["tensor_bytes"] for p in points]
    held = [p["rss_added_held_kb"] for p in points]
    stored = sum(d.tokens for d in deposited)
    return {
        "machine": {"cpu_count": os.cpu_count(), "load_average": os.getloadavg()},
        "window": args.window, "stride": args.stride, "target_tokens": args.target_tokens,
        "library_tokens": stored, "library_artifacts": len(deposited), "library_bytes": sum(d.size_bytes for d in deposited),
        "library_disk_bytes": disk, "widening": stored / args.window, "sequences": grown["sequences"],
        "catalog_context": context, "points": points,
        "resident_flat": len(set(tensor)) == 1 and max(held) - min(held) <= args.rss_tolerance_kb,
        "resident_tensor_bytes": tensor[0] if tensor else None,
        "resident_held_kb_range": [min(held), max(held)] if held else None,
        "largest_graft": {"tokens": largest.tokens, "bytes": largest.size_bytes, **largest_resident},
        "checks": checks, "all_exact": all(c["header_logits_equal"] and c["graft_equals_fresh"] for c in checks),
        "models": models,
        "timing": {"grow_s": grown["grow_s"], "prefill_s": grown["prefill_s"], "check_s": check_s,
                   "graft_s_median": statistics.median(p["graft_s"] for p in points) if points else None},
    }


def print_report(r: dict[str, Any]) -> None:
    print(f"library: {r['library_tokens']:,} tokens in {r['library_artifacts']} artifacts "
          f"({r['library_bytes'] / 1e6:,.1f} MB; {r['sequences']} corpus sequences) = {r['widening']:,.1f}x the "
          f"{r['window']:,}-token window  (reference: {REFERENCE_WINDOW:,} -> {REFERENCE_TOKENS:,} = "
          f"{REFERENCE_TOKENS / REFERENCE_WINDOW:,.1f}x)")
    for c in r["catalog_context"]:
        print(f"catalog says: {c['summary']}")
    print(f"{'library tokens':>15} {'artifacts':>9} {'library MB':>10} {'graft tokens':>12} {'tensor bytes':>12} "
          f"{'+RSS held kB':>12} {'+RSS peak kB':>12} {'proc RSS':>8} {'graft ms':>8}")
    for p in r["points"]:
        peak = "n/a" if p["rss_added_peak_kb"] is None else f"{p['rss_added_peak_kb']:,}"
        print(f"{p['library_tokens']:>15,} {p['library_artifacts']:>9} {p['library_bytes'] / 1e6:>10,.1f} "
              f"{p['probe_tokens']:>12,} {p['tensor_bytes']:>12,} {p['rss_added_held_kb']:>12,} {peak:>12} "
              f"{p['process_rss_mb']:>7.0f}M {p['graft_s'] * 1e3:>8.1f}")
    lg = r["largest_graft"]
    print(f"resident flat: {r['resident_flat']}; largest graft ({lg['tokens']:,} tokens) holds {lg['tensor_bytes']:,} "
          f"tensor bytes = {lg['tensor_bytes'] / max(1, r['library_bytes']):.4%} of the library")
    for c in r["checks"]:
        print(f"check {c['artifact'][:12]} ({c['tokens']:,} tokens): fresh prefill == header logits "
              f"{c['header_logits_equal']}; graft == fresh (next token) {c['graft_equals_fresh']}")
    print(f"{'model':>13} {'tokens':>6} {'bytes':>11} {'B/token':>8} {'KV B/tok <win':>13} {'KV B/tok >win':>13} "
          + " ".join(f"{k:>8} {k + '+shuf':>10}" for k in r["models"][0]["zstd"]))
    for m in r["models"]:
        z = " ".join(f"{v['ratio']:>7.3f}x {v['shuffled_ratio']:>9.3f}x" for v in m["zstd"].values())
        print(f"{m['model']:>13} {m['artifact_tokens']:>6,} {m['artifact_bytes']:>11,} {m['bytes_per_token']:>8,.1f} "
              f"{m['kv_bytes_per_token_in_window']:>13,} {m['kv_bytes_per_token_past_window']:>13,} {z}")
    t = r["timing"]
    print(f"time: grow {t['grow_s']:.0f} s (prefill {t['prefill_s']:.0f} s), checks {t['check_s']:.0f} s; "
          f"load average {r['machine']['load_average'][0]:.1f} on {r['machine']['cpu_count']} cores")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target-tokens", type=int, default=REFERENCE_TOKENS, help="grow the library to at least this")
    p.add_argument("--window", type=int, default=REFERENCE_WINDOW, help="tiny model's window = longest artifact")
    p.add_argument("--stride", type=int, default=512, help="prefill chunk, and tokens between captured artifacts")
    p.add_argument("--probe-tokens", type=int, default=8192, help="length of the artifact grafted at each size")
    p.add_argument("--points", type=int, default=6, help="library sizes at which the graft is measured")
    p.add_argument("--checks", type=int, default=3, help="random stored artifacts checked byte-exact")
    p.add_argument("--models", default="tiny," + ",".join(REAL_MODELS), help="comma list: tiny and/or real models")
    p.add_argument("--real-tokens", type=int, default=256, help="length of the real models' artifacts")
    p.add_argument("--zstd-levels", default=",".join(map(str, DEFAULT_LEVELS)))
    p.add_argument("--rss-tolerance-kb", type=int, default=1024, help="held-RSS spread (kB) still called flat")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None, help="where the temporary library lives (default: system temp)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    args = p.parse_args(argv)
    if args.window % args.stride or args.probe_tokens > args.window:
        p.error("--window must be a multiple of --stride, and --probe-tokens at most --window")
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0 if result["all_exact"] and result["resident_flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
