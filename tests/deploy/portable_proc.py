"""One "machine" of the portability test, run as its own process with its own FLYWHEEL_LIBRARY.

    python portable_proc.py deposit MODEL EXPORT_DIR   # deposit, export bundle + raw artifact file
    python portable_proc.py import  MODEL EXPORT_DIR   # import the bundle elsewhere, graft, compare
    python portable_proc.py refuse  MODEL EXPORT_DIR   # another fingerprint (eager attention): refused
    python portable_proc.py refuse-isa MODEL EXPORT_DIR  # default settings; the caller caps the CPU's ISA

Prints one JSON object on the last line of stdout.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from flywheel.engine import Engine, EngineSettings
from flywheel.errors import FingerprintMismatchError
from flywheel.kv import graft, logits_sha256, parse_artifact
from flywheel.library import Library
from flywheel.problemsets import Problem
from flywheel.prompts import graft_prefix

PROBLEM = Problem(id="port-1", text="What is 12 + 30?", reference="42", source="portability")
SOLUTION, ANSWER = "12 + 30 = 42.", "42"
CONTINUATION = "\nNext problem: what is 7 + 8?"


def continuation_logits_sha(engine: Engine, cache: object) -> str:
    ids = engine.encode(CONTINUATION, bos=False)
    return logits_sha256(engine.forward(ids, cache, keep=len(ids)))  # type: ignore[arg-type]


def deposit(model: str, out: Path) -> dict[str, object]:
    from flywheel.bundle import export_bundle

    engine = Engine.load(model, progress=False)
    with Library.open() as lib:                         # the root comes from FLYWHEEL_LIBRARY
        r = lib.deposit(engine, PROBLEM, SOLUTION, ANSWER, index=False)
        src = Path(lib.store.path_for(r.artifact_sha256))
        shutil.copyfile(src, out / "artifact.kv")       # the raw file, as one would scp it
        export_bundle(lib, out / "bundle.tar")
        grafted = lib.load_graft(engine, r.artifact_sha256)
        cache, _ = engine.prefill(engine.encode(graft_prefix(PROBLEM.text, SOLUTION, ANSWER)))
        return {"sha256": r.artifact_sha256, "store_path": str(src), "fingerprint": engine.fingerprint.digest,
                "file_sha256": hashlib.sha256(src.read_bytes()).hexdigest(),
                "grafted_logits": continuation_logits_sha(engine, grafted.cache),
                "fresh_logits": continuation_logits_sha(engine, cache)}


def import_(model: str, out: Path) -> dict[str, object]:
    from flywheel.bundle import import_bundle

    engine = Engine.load(model, progress=False)
    data = (out / "artifact.kv").read_bytes()
    with Library.open() as lib:
        raw_sha = lib.store.put(data)                   # the raw file into this machine's store
        report = import_bundle(lib, out / "bundle.tar", engine)
        row = lib.catalog.get_artifact(raw_sha)
        stored = Path(lib.store.path_for(raw_sha))
        grafted = lib.load_graft(engine, raw_sha)
        return {"sha256": raw_sha, "store_path": str(stored), "fingerprint": engine.fingerprint.digest,
                "file_sha256": hashlib.sha256(stored.read_bytes()).hexdigest(),
                "catalogued": row.sha256 == raw_sha, "imported": report.imported, "present": report.present,
                "skipped": report.skipped, "grafted_logits": continuation_logits_sha(engine, grafted.cache)}


def refuse(model: str, out: Path, settings: EngineSettings | None = None) -> dict[str, object]:
    from flywheel.bundle import import_bundle

    engine = Engine.load(model, settings or EngineSettings(attn_implementation="eager"), progress=False)
    artifact = parse_artifact((out / "artifact.kv").read_bytes())
    result: dict[str, object] = {"fingerprint": engine.fingerprint.digest}
    try:
        graft(engine, artifact)
        result["refused"] = False
    except FingerprintMismatchError as err:
        result.update(refused=True, error=type(err).__name__, message=str(err))
    with Library.open() as lib:
        report = import_bundle(lib, out / "bundle.tar", engine)
        result.update(bundle_imported=report.imported, bundle_skipped=report.skipped,
                      catalogued=len(lib.catalog.list_artifacts()))
    return result


if __name__ == "__main__":
    mode, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    fn = {"deposit": deposit, "import": import_, "refuse": refuse,
          "refuse-isa": lambda m, o: refuse(m, o, EngineSettings())}[mode]
    print(json.dumps(fn(model, out)))
