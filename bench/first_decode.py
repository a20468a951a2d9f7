"""Time to the first decode step of a fresh command, model against model, side by side in one run.

What a user waits for before anything is decoded: a fresh process typing
`flywheel --model M run --problems P --limit 1 --budget 1 --no-graft --no-deposit --no-starter --json`
on a new, empty library: imports, the model's load (its weights' SHA-256 is remembered beside the
file, `flywheel.modelzoo.file_sha256`, so an unchanged file is not read again), Prefect's temporary
server, the prompt's prefill, one decode step, the verifier and the catalog write. With a one-token
budget the command ends right after its first decode step, so its wall is that time plus the
run's close (an upper bound on the time to the first step).

Models are run in turns (A, B, A, B, ...) so that a change in the machine's load falls on both;
the figure per model is the median of `--rounds`, and the ratio is each model's median over the
first model's. One warm-up command per model first (the file-system cache and the hash memo as a
user's second command finds them: the first command after `prepare-model` is not the one measured).

    PYTHONPATH=$PWD .venv/bin/python bench/first_decode.py                                  # gemma3-270m vs qwen2.5-coder-0.5b
    PYTHONPATH=$PWD .venv/bin/python bench/first_decode.py --models gemma3-270m,qwen2.5-coder-1.5b --rounds 5 --json
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as `python bench/x.py`, this directory is sys.path[0]: take it off so that no file here can
# shadow a package the flywheel imports (bench/verifiers.py once shadowed `verifiers`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

DEFAULT_MODELS = "gemma3-270m,qwen2.5-coder-0.5b"
PROBLEM = "gen:linear?n=1&seed=1"


def cpu_name() -> str:
    """The CPU's model name and whether it has AVX-512 (figures differ ~2.5x between such hosts)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    return f"{name}, {'AVX-512' if 'avx512f' in flags else 'AVX2 only' if 'avx2' in flags else 'no AVX2'}"


def fresh_command(flywheel: str, model: str, problems: str, workdir: Path) -> dict[str, Any]:
    """One fresh `flywheel run` with a one-token budget on a new library: its wall and what it decoded."""
    with tempfile.TemporaryDirectory(prefix="first-decode-", dir=workdir) as tmp:
        env = {**os.environ, "PREFECT_HOME": str(Path(tmp) / "prefect")}
        cmd = [flywheel, "--model", model, "--library", str(Path(tmp) / "lib"), "run", "--problems", problems,
               "--limit", "1", "--budget", "1", "--no-graft", "--no-deposit", "--no-starter", "--json"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{model}: the command failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    totals = out["totals"]
    if totals["decode_tokens"] != 1:
        raise SystemExit(f"{model}: the command decoded {totals['decode_tokens']} tokens, not the one asked for")
    return {"wall_s": wall, "decode_tokens": totals["decode_tokens"], "prefill_tokens": totals["prefill_tokens"],
            "flow_wall_s": out["timing"]["wall_seconds"], "model_s": out["timing"]["model_seconds"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated; ratios are over the first")
    ap.add_argument("--rounds", type=int, default=3, help="measured commands per model (after one warm-up)")
    ap.add_argument("--problems", default=PROBLEM, help="the problem set (its first problem is asked)")
    ap.add_argument("--workdir", default=None, help="where the throwaway libraries live (default: system temp)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    flywheel = str(Path(sys.executable).parent / "flywheel")
    workdir = Path(args.workdir) if args.workdir else None
    load_start = os.getloadavg()[0]
    for m in models:   # warm-up: not measured
        fresh_command(flywheel, m, args.problems, workdir or Path(tempfile.gettempdir()))
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
    for i in range(args.rounds):
        for m in models:
            r = fresh_command(flywheel, m, args.problems, workdir or Path(tempfile.gettempdir()))
            runs[m].append(r)
            if not args.json:
                print(f"  round {i + 1} {m}: {r['wall_s']:.1f} s ({r['prefill_tokens']} prefill tokens)", flush=True)
    medians = {m: statistics.median(r["wall_s"] for r in runs[m]) for m in models}
    out = {"cpu": cpu_name(), "cores": os.cpu_count(), "load_average": [load_start, os.getloadavg()[0]],
           "problems": args.problems, "rounds": args.rounds, "median_wall_s": medians,
           "ratio_to_first": {m: medians[m] / medians[models[0]] for m in models}, "runs": runs}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['cpu']}, {out['cores']} cores, load average {load_start:.2f} -> {out['load_average'][1]:.2f}")
        for m in models:
            print(f"{m:>24}: median {medians[m]:.1f} s to a fresh command's first decode step "
                  f"(x{out['ratio_to_first'][m]:.2f} of {models[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
