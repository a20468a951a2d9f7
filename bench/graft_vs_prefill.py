"""Restore a KV artifact from disk vs recompute its prefill, side by side in one run.

Also measured in the same run, for scale: a raw `safetensors.torch.load_file` of the same
tensors (lazy mmap: no byte is read or checked), the same load plus one SHA-256 pass over the
file (the least a checked load can do), and the in-memory `copy.deepcopy(DynamicCache)` recipe.
Times are medians of repeats on a warm page cache.

    python bench/graft_vs_prefill.py --tokens 256 1024 2048 [--model gemma3-270m] [--json]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from safetensors.torch import load_file, save_file

from flywheel.engine import Engine, EngineSettings
from flywheel.kv import capture, graft, logits_sha256, read_artifact
from flywheel.verify_graft import corpus_ids


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(engine: Engine, tokens: int, repeats: int, prefill_repeats: int, workdir: Path) -> dict[str, float | int | str | bool]:
    ids = corpus_ids(engine, tokens)
    cache, last = engine.prefill(ids)
    artifact = capture(engine, cache, ids, last)
    path = artifact.write(workdir / f"{artifact.sha256}.kv")
    raw = workdir / "raw.safetensors"
    save_file({k: v.contiguous() for k, v in artifact.tensors.items()}, str(raw))

    t_prefill = median_time(lambda: engine.prefill(ids), prefill_repeats)
    t_restore = median_time(lambda: graft(engine, read_artifact(path)), repeats)
    t_raw = median_time(lambda: load_file(str(raw)), repeats)
    t_raw_hashed = median_time(lambda: (load_file(str(raw)), hashlib.sha256(raw.read_bytes()).digest()), repeats)
    t_deepcopy = median_time(lambda: copy.deepcopy(cache), repeats)

    # The restored state must be the real thing: same next-token logits as the live cache.
    probe = ids[-1:]
    g = graft(engine, read_artifact(path))
    exact = logits_sha256(engine.forward(probe, g.cache)) == logits_sha256(engine.forward(probe, copy.deepcopy(cache)))
    size = path.stat().st_size
    return {
        "tokens": tokens, "artifact_bytes": size, "bytes_per_token": round(size / tokens, 1),
        "prefill_s": t_prefill, "restore_s": t_restore, "raw_safetensors_s": t_raw, "raw_plus_sha256_s": t_raw_hashed, "deepcopy_s": t_deepcopy,
        "speedup": t_prefill / t_restore, "restore_over_raw": t_restore / t_raw,
        "restore_over_raw_plus_sha256": t_restore / t_raw_hashed,
        "restore_gb_per_s": size / t_restore / 1e9, "exact": exact,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048])
    parser.add_argument("--model", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--prefill-repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    engine = Engine.load(args.model, EngineSettings(device=args.device))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tokens:
            rows.append(measure(engine, n, args.repeats, args.prefill_repeats, Path(tmp)))
    result = {"model": engine.fingerprint.model, "device": engine.fingerprint.device_name,
              "fingerprint": engine.fingerprint.digest, "peak_rss_mb": peak_rss_mb(), "rows": rows}
    if len(rows) == 1:
        result.update(rows[0])
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['model']} on {result['device']}  (median of {args.repeats} restores, {args.prefill_repeats} prefills)")
        print(f"{'tokens':>7} {'bytes':>11} {'prefill':>9} {'restore':>9} {'raw st':>9} {'deepcopy':>9} "
              f"{'raw+sha':>9} {'speedup':>9} {'vs raw':>7} {'vs r+sha':>8} {'GB/s':>6} exact")
        for r in rows:
            print(f"{r['tokens']:>7} {r['artifact_bytes']:>11,} {r['prefill_s'] * 1e3:>7.0f}ms {r['restore_s'] * 1e3:>7.1f}ms "
                  f"{r['raw_safetensors_s'] * 1e3:>7.1f}ms {r['deepcopy_s'] * 1e3:>7.1f}ms {r['raw_plus_sha256_s'] * 1e3:>7.1f}ms "
                  f"{r['speedup']:>8.0f}x {r['restore_over_raw']:>6.2f}x {r['restore_over_raw_plus_sha256']:>7.2f}x "
                  f"{r['restore_gb_per_s']:>6.2f} {r['exact']}")
        print(f"peak RSS {result['peak_rss_mb']:.0f} MB")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
