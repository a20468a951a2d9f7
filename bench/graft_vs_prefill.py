"""Restore a KV artifact from the store vs recompute its prefill vs what users do today, in one run.

Per prefix length, side by side (medians of repeats, warm page cache unless marked cold):

- `prefill`: recompute the prefix in the engine's schedule (what a restore saves).
- `restore`: `Library.load_raw_graft` from the artifact store — read, content-hash check (the store
  hands over the bytes, the parser checks their content SHA-256 against the requested id once),
  fingerprint check, graft.
  `speedup` = prefill / restore. `restore cold`: the same after evicting the file from the page
  cache (`posix_fadvise(DONTNEED)`), i.e. from the disk.
- `file`: `read_artifact(path)` + `graft` (private mmap, one hash pass).
- `deepcopy`: an in-memory `DynamicCache` + `copy.deepcopy` (transformers' prompt-reuse recipe;
  process-local, nothing persists, nothing is checked).
- `torch.load`: **the competitor only** — the CAG recipe, `torch.save(cache)` / `torch.load` of the
  cache object, here on a file this benchmark itself just wrote, loaded with `weights_only=True`
  and the three transformers cache classes allowlisted (a user-supplied file is never loaded so
  anywhere in kv-flywheel; artifacts are safetensors with no pickle).
- `raw st` / `raw+sha`: `safetensors.torch.load_file` of the same tensors (lazy mmap: no byte is
  read or checked), and that plus one SHA-256 pass over the file: the floor of a checked load.

Also measured in the same run: the machine's sequential read bandwidth (cold, after evicting a
scratch file from the page cache, and warm) and memcpy bandwidth, against which each restore's
bytes/s is put; the peak RSS added by each restore path (`/proc/self/status` VmHWM, reset per
measurement through `/proc/self/clear_refs`); and the process's peak RSS.

    python bench/graft_vs_prefill.py --tokens 256 1024 2048 4096 [--model gemma3-270m] [--json]
    python bench/graft_vs_prefill.py --tokens 64 --model /tmp/tiny-gemma --repeats 3 --bw-mib 64
"""

from __future__ import annotations

import argparse
import copy
import gc
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from procmem import release_free_memory, status_kb  # bench/procmem.py
from safetensors.torch import load_file, save_file
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from flywheel.engine import Engine, EngineSettings
from flywheel.kv import capture, graft, logits_sha256, read_artifact
from flywheel.kv.exactness import corpus_ids
from flywheel.library import Library

DEFAULT_TOKENS = [256, 1024, 2048, 4096]
READ_BLOCK = 8 * 1024 * 1024  # sequential reads in 8 MiB requests
#: The only globals the competitor's weights_only load is allowed to construct.
CACHE_CLASSES: list[Any] = [DynamicCache, DynamicLayer, DynamicSlidingWindowLayer]


# --- the machine's own bandwidths ----------------------------------------------------------------


def evict(path: Path) -> None:
    """Drop `path`'s clean pages from the page cache (the next read comes from the disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_seconds(path: Path) -> float:
    """Seconds to read `path` front to back into one preallocated buffer."""
    buf = bytearray(READ_BLOCK)
    view = memoryview(buf)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(view):
            pass
    return time.perf_counter() - t0


def machine_bandwidth(workdir: Path, mib: int, repeats: int = 3) -> dict[str, float]:
    """Sequential read bytes/s (cold and warm) of a `mib`-MiB scratch file, and memcpy bytes/s."""
    path = workdir / "bandwidth.bin"
    block = np.random.default_rng(0).integers(0, 256, READ_BLOCK, dtype=np.uint8).tobytes()
    with open(path, "wb") as fh:
        for _ in range(max(1, mib * 1024 * 1024 // READ_BLOCK)):
            fh.write(block)
    size = path.stat().st_size
    cold = []
    for _ in range(repeats):
        evict(path)
        cold.append(read_seconds(path))
    warm = [read_seconds(path) for _ in range(repeats)]
    path.unlink()
    src = np.frombuffer(block * max(1, mib * 1024 * 1024 // READ_BLOCK // 2), dtype=np.uint8)
    dst = np.empty_like(src)
    copies = median_time(lambda: np.copyto(dst, src), repeats + 2)
    return {"read_cold_bytes_per_s": size / statistics.median(cold), "read_warm_bytes_per_s": size / statistics.median(warm),
            "memcpy_bytes_per_s": src.nbytes / copies, "scratch_bytes": size}


# --- measuring -----------------------------------------------------------------------------------


def median_time(fn: Callable[[], object], repeats: int, before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_added_mb(fn: Callable[[], object]) -> float | None:
    """Peak RSS added while `fn` runs (its result is held until the peak is read), or None off Linux."""
    gc.collect()
    release_free_memory()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        return None
    before = status_kb("VmRSS")
    result = fn()
    peak = status_kb("VmHWM")
    del result
    return (peak - before) / 1024


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def torch_load_cache(path: Path) -> DynamicCache:
    """The competitor's load: the pickled cache object, weights_only with the cache classes allowlisted."""
    with torch.serialization.safe_globals(CACHE_CLASSES):
        cache = torch.load(path, weights_only=True)
    assert isinstance(cache, DynamicCache)
    return cache


def measure(engine: Engine, lib: Library, tokens: int, repeats: int, prefill_repeats: int,
            workdir: Path) -> dict[str, Any]:
    ids = corpus_ids(engine, tokens)
    cache, last = engine.prefill(ids)
    artifact = capture(engine, cache, ids, last)
    sha = lib.store.put(artifact.to_bytes())
    stored = Path(lib.store.path_for(sha))
    path = artifact.write(workdir / f"{sha}.kv")
    raw = workdir / "raw.safetensors"
    save_file({k: v.contiguous() for k, v in artifact.tensors.items()}, str(raw))
    pickled = workdir / "cache.pt"
    torch.save(cache, pickled)  # the competitor's file: written here, by us, and loaded only here
    size, pickled_size = stored.stat().st_size, pickled.stat().st_size

    t_prefill = median_time(lambda: engine.prefill(ids), prefill_repeats)
    t_restore = median_time(lambda: lib.load_raw_graft(engine, sha), repeats)
    t_cold = median_time(lambda: lib.load_raw_graft(engine, sha), max(3, repeats // 3), before=lambda: evict(stored))
    t_file = median_time(lambda: graft(engine, read_artifact(path)), repeats)
    t_deepcopy = median_time(lambda: copy.deepcopy(cache), repeats)
    t_torch = median_time(lambda: torch_load_cache(pickled), repeats)
    t_torch_cold = median_time(lambda: torch_load_cache(pickled), max(3, repeats // 3), before=lambda: evict(pickled))
    t_raw = median_time(lambda: load_file(str(raw)), repeats)
    t_raw_hashed = median_time(lambda: (load_file(str(raw)), hashlib.sha256(raw.read_bytes()).digest()), repeats)
    t_save_ours = median_time(lambda: capture(engine, cache, ids, last).write(workdir / "again.kv"), 3)
    t_save_torch = median_time(lambda: torch.save(cache, workdir / "again.pt"), 3)

    # Every restored state must be the real thing: the live cache's next-token logits, byte for byte.
    probe = ids[-1:]
    want = logits_sha256(engine.forward(probe, copy.deepcopy(cache)))
    exact = {
        "store": logits_sha256(engine.forward(probe, lib.load_raw_graft(engine, sha).cache)) == want,
        "file": logits_sha256(engine.forward(probe, graft(engine, read_artifact(path)).cache)) == want,
        "torch_load": logits_sha256(engine.forward(probe, torch_load_cache(pickled))) == want,
    }
    rss = {
        "store": peak_rss_added_mb(lambda: lib.load_raw_graft(engine, sha)),
        "file": peak_rss_added_mb(lambda: graft(engine, read_artifact(path))),
        "deepcopy": peak_rss_added_mb(lambda: copy.deepcopy(cache)),
        "torch_load": peak_rss_added_mb(lambda: torch_load_cache(pickled)),
    }
    for p in (path, raw, pickled, workdir / "again.kv", workdir / "again.pt"):
        p.unlink(missing_ok=True)
    return {
        "tokens": tokens, "artifact_bytes": size, "bytes_per_token": round(size / tokens, 1),
        "torch_save_bytes": pickled_size,
        "prefill_s": t_prefill, "restore_s": t_restore, "restore_cold_s": t_cold, "restore_file_s": t_file,
        "deepcopy_s": t_deepcopy, "torch_load_s": t_torch, "torch_load_cold_s": t_torch_cold,
        "raw_safetensors_s": t_raw, "raw_plus_sha256_s": t_raw_hashed,
        "save_artifact_s": t_save_ours, "torch_save_s": t_save_torch,
        "speedup": t_prefill / t_restore, "speedup_cold": t_prefill / t_cold,
        "restore_over_torch_load": t_restore / t_torch, "restore_over_deepcopy": t_restore / t_deepcopy,
        "restore_over_raw_plus_sha256": t_restore / t_raw_hashed,
        "restore_bytes_per_s": size / t_restore, "restore_cold_bytes_per_s": size / t_cold,
        "peak_rss_added_mb": rss, "exact_by_path": exact, "exact": all(exact.values()),
    }


def with_machine_ratios(row: dict[str, Any], bw: dict[str, float]) -> dict[str, Any]:
    """Each restore's bytes/s as a fraction of the machine's read and memcpy bandwidth."""
    row["restore_of_warm_read"] = row["restore_bytes_per_s"] / bw["read_warm_bytes_per_s"]
    row["restore_of_memcpy"] = row["restore_bytes_per_s"] / bw["memcpy_bytes_per_s"]
    row["restore_cold_of_cold_read"] = row["restore_cold_bytes_per_s"] / bw["read_cold_bytes_per_s"]
    return row


# --- output --------------------------------------------------------------------------------------


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f}"


def print_table(result: dict[str, Any]) -> None:
    bw, rows = result["machine"], result["rows"]
    print(f"{result['model']} on {result['device']}, {os.cpu_count()} cores  (medians; {result['repeats']} restores, "
          f"{result['prefill_repeats']} prefills per length)")
    print(f"machine: sequential read cold {_gb(bw['read_cold_bytes_per_s'])} GB/s, warm {_gb(bw['read_warm_bytes_per_s'])} GB/s; "
          f"memcpy {_gb(bw['memcpy_bytes_per_s'])} GB/s  ({bw['scratch_bytes'] / 2**20:.0f} MiB scratch file)")
    print(f"{'tokens':>6} {'bytes':>11} {'prefill':>9} {'restore':>8} {'cold':>8} {'file':>8} {'deepcopy':>8} "
          f"{'torch.load':>10} {'raw+sha':>8} {'speedup':>8} {'vs t.load':>9} {'GB/s':>5} {'%read':>6} {'%memcpy':>7} exact")
    for r in rows:
        ms = {k: r[k] * 1e3 for k in ("prefill_s", "restore_s", "restore_cold_s", "restore_file_s", "deepcopy_s",
                                      "torch_load_s", "raw_plus_sha256_s")}
        print(f"{r['tokens']:>6} {r['artifact_bytes']:>11,} {ms['prefill_s']:>7.0f}ms {ms['restore_s']:>6.1f}ms "
              f"{ms['restore_cold_s']:>6.1f}ms {ms['restore_file_s']:>6.1f}ms {ms['deepcopy_s']:>6.1f}ms "
              f"{ms['torch_load_s']:>8.1f}ms {ms['raw_plus_sha256_s']:>6.1f}ms {r['speedup']:>7.0f}x "
              f"{r['restore_over_torch_load']:>8.2f}x {_gb(r['restore_bytes_per_s']):>5} "
              f"{100 * r['restore_of_warm_read']:>5.0f}% {100 * r['restore_of_memcpy']:>6.0f}% {r['exact']}")
    print("peak RSS added by one restore (MB):  store / file / deepcopy / torch.load")
    for r in rows:
        rss = r["peak_rss_added_mb"]
        print(f"{r['tokens']:>6}  " + " / ".join("n/a" if rss[k] is None else f"{rss[k]:.1f}"
                                                 for k in ("store", "file", "deepcopy", "torch_load")))
    print(f"process peak RSS {result['peak_rss_mb']:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=DEFAULT_TOKENS, help="prefix lengths")
    parser.add_argument("--model", default=None, help="model name or local directory (default gemma3-270m)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=15, help="timed restores per path and length")
    parser.add_argument("--prefill-repeats", type=int, default=2)
    parser.add_argument("--bw-mib", type=int, default=512, help="scratch file size for the read bandwidth")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    engine = Engine.load(args.model, EngineSettings(device=args.device), progress=not args.json)
    rows = []
    with tempfile.TemporaryDirectory(prefix="graft-bench-") as tmp:
        bw = machine_bandwidth(Path(tmp), args.bw_mib)
        with Library.open(Path(tmp) / "library") as lib:
            for n in args.tokens:
                rows.append(with_machine_ratios(measure(engine, lib, n, args.repeats, args.prefill_repeats, Path(tmp)), bw))
        bw = {**bw, **{f"after_{k}": v for k, v in machine_bandwidth(Path(tmp), args.bw_mib).items()
                       if k != "scratch_bytes"}}  # the machine is shared: once more, to show drift
    result: dict[str, Any] = {
        "model": engine.fingerprint.model, "device": engine.fingerprint.device_name, "cpu_count": os.cpu_count(),
        "fingerprint": engine.fingerprint.digest, "repeats": args.repeats, "prefill_repeats": args.prefill_repeats,
        "machine": bw, "peak_rss_mb": peak_rss_mb(), "rows": rows}
    if len(rows) == 1:
        result.update(rows[0])
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
