"""The retrieval benchmark runs small in CI and reports exact search as exact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "retrieval.py"


def test_bench_prints_every_index_side_by_side_with_recall() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "800", "--queries", "20", "--repeats", "3",
         "--approx", "ivf,hnsw", "--no-embed"],
        check=True, capture_output=True, text=True, timeout=300).stdout
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.strip().startswith("800")}
    assert set(rows) == {"numpy", "flat", "ivf", "hnsw"}
    assert rows["flat"][-1] == "1.0000"  # IndexFlatIP is exact: same top-1 as brute force
    assert all(0.0 <= float(r[-1]) <= 1.0 for r in rows.values())
    assert "recurrence found its own source: 1.0000" in out
