"""Artifacts travel: deposited on one "machine" (process + library root), moved as bytes and as a
bundle to another, they are byte-identical there and graft with identical logits; a machine with
another fingerprint refuses them with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HELPER = Path(__file__).with_name("portable_proc.py")


def _machine(mode: str, model: Path, root: Path, out: Path, **env_extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(FLYWHEEL_LIBRARY=str(root), PYTHONHASHSEED="0", **env_extra)
    root.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, str(HELPER), mode, str(model), str(out)], env=env, cwd=root.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"{proc.args[2]} failed:\n{stderr[-3000:]}"
    return json.loads(stdout.strip().splitlines()[-1])


def test_artifact_moves_byte_identical_and_grafts_identically(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    model = tiny_dirs["gemma3"]
    out = tmp_path / "transfer"
    out.mkdir()
    a = _result(_machine("deposit", model, tmp_path / "machine-a" / "library", out))
    b_proc = _machine("import", model, tmp_path / "machine-b" / "library", out)
    c_proc = _machine("refuse", model, tmp_path / "machine-c" / "library", out)
    b, c = _result(b_proc), _result(c_proc)
    # machine D: the same CPU model name with its kernels' instruction set capped (as on an AVX2-only
    # host of the same name): another device, refused, never compared
    d = _result(_machine("refuse-isa", model, tmp_path / "machine-d" / "library", out,
                         ATEN_CPU_CAPABILITY="default", ONEDNN_MAX_CPU_ISA="SSE41"))

    # machine A: the graft continues exactly like the live prefill
    assert len(a["sha256"]) == 64 and len(a["file_sha256"]) == 64
    assert a["grafted_logits"] == a["fresh_logits"]
    # machine B: a different root, a different process; same bytes, same logits
    assert Path(b["store_path"]).resolve() != Path(a["store_path"]).resolve()
    assert b["sha256"] == a["sha256"] and b["file_sha256"] == a["file_sha256"]
    assert b["fingerprint"] == a["fingerprint"]
    assert b["catalogued"] and b["skipped"] == [] and b["imported"] == 1 and b["present"] == 1
    assert b["grafted_logits"] == a["grafted_logits"] == a["fresh_logits"]
    # machine C: another fingerprint (eager attention) refuses, naming what differs
    assert c["fingerprint"] != a["fingerprint"]
    assert c["refused"] is True and c["error"] == "FingerprintMismatchError"
    assert "attn_implementation" in c["message"] and "eager" in c["message"]
    assert c["bundle_imported"] == 0 and c["catalogued"] == 0
    assert [sha for sha, _reason in c["bundle_skipped"]] == [a["sha256"]]
    assert d["fingerprint"] != a["fingerprint"] and d["refused"] is True
    assert "device_name" in d["message"] and "ONEDNN_MAX_CPU_ISA=SSE41" in d["message"]
    assert d["bundle_imported"] == 0 and d["catalogued"] == 0
