"""Library bundles: a plain tar of artifacts plus a manifest, to move a library between machines.

Layout:  manifest.json  +  artifacts/<sha256>.kv

Import never extracts by the names inside the tar: each member is read into memory, so no
path in a bundle can write anywhere. A member that is not exactly `manifest.json` or
`artifacts/<64 hex>.kv`, or is not a regular file, refuses the whole bundle before anything is
written. Every artifact is re-hashed, its header fingerprint compared with the manifest's and
with the importing engine's, and only then stored and catalogued.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flywheel.errors import ArtifactError, InputError
from flywheel.kv.artifact import artifact_name, parse_artifact

if TYPE_CHECKING:
    from flywheel.library import Library

BUNDLE_FORMAT = "kv-flywheel-bundle"
BUNDLE_VERSION = 1
_MEMBER = re.compile(r"^artifacts/([0-9a-f]{64})\.kv$")
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
MAX_ARTIFACT_BYTES = 16 * 1024 ** 3


@dataclass
class ImportReport:
    imported: int = 0
    present: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)


def export_bundle(lib: Library, path: Path) -> int:
    """Write every catalogued artifact (verified or not) with its problem and solution; returns the count."""
    entries: list[dict[str, Any]] = []
    tmp = path.with_name(f".{path.name}.tmp")
    with tarfile.open(tmp, "w") as tar:
        for a in lib.catalog.list_artifacts(include_unverified=True):
            data = lib.store.get(a.sha256)
            if data is None:
                raise ArtifactError(f"artifact {a.sha256[:12]} is catalogued but its file is missing",
                                    hint="run `flywheel library verify` and repair the library before exporting")
            sol, prob = lib.catalog.get_solution(a.solution_id), lib.catalog.get_problem(a.problem_id)
            assert sol is not None and prob is not None  # foreign keys guarantee both
            entries.append({
                "sha256": a.sha256, "fingerprint_digest": a.fingerprint_digest,
                "fingerprint": json.loads(a.fingerprint_json), "model_name": a.model_name,
                "token_count": a.token_count, "size_bytes": a.size_bytes, "logits_sha256": a.logits_sha256,
                "problem": {"id": prob.id, "text": prob.text, "reference": prob.reference, "source": prob.source},
                "solution": {"text": sol.text, "answer": sol.answer, "verdict_status": sol.verdict_status,
                             "verdict_reason": sol.verdict_reason, "deposited_by": sol.deposited_by,
                             "unverified": sol.unverified}})
            _add(tar, f"artifacts/{a.sha256}.kv", bytes(data))
        manifest = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "artifacts": entries}
        _add(tar, "manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode())
    tmp.replace(path)
    return len(entries)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _members(path: Path) -> tuple[dict[str, Any], dict[str, tarfile.TarInfo], tarfile.TarFile]:
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as err:
        raise InputError(f"{path} is not a readable bundle (tar): {err}") from err
    artifacts: dict[str, tarfile.TarInfo] = {}
    manifest_info = None
    for m in tar.getmembers():
        if not m.isfile():
            raise InputError(f"bundle member {m.name!r} is not a regular file (links and devices are refused)")
        if m.name == "manifest.json":
            manifest_info = m
        elif (match := _MEMBER.match(m.name)) is not None:
            if m.size > MAX_ARTIFACT_BYTES:
                raise InputError(f"bundle member {m.name!r} is implausibly large ({m.size:,} bytes)")
            artifacts[match.group(1)] = m
        else:
            raise InputError(f"bundle holds an unknown or unsafe path {m.name!r}; nothing was imported",
                             hint="a bundle contains only manifest.json and artifacts/<sha256>.kv")
    if manifest_info is None or manifest_info.size > MAX_MANIFEST_BYTES:
        raise InputError(f"{path} has no usable manifest.json; nothing was imported")
    fh = tar.extractfile(manifest_info)
    assert fh is not None
    try:
        manifest = json.loads(fh.read())
    except json.JSONDecodeError as err:
        raise InputError(f"bundle manifest is not JSON: {err}") from err
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT or manifest.get("version") != BUNDLE_VERSION:
        raise InputError("bundle manifest is not a kv-flywheel bundle of a version this build reads")
    return manifest, artifacts, tar


def import_bundle(lib: Library, path: Path, fingerprint_digest: str, *, any_fingerprint: bool = False) -> ImportReport:
    """Import a bundle into `lib`; artifacts of other fingerprints are refused unless `any_fingerprint`."""
    from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec

    manifest, members, tar = _members(path)
    report = ImportReport()
    with tar:
        for entry in manifest.get("artifacts", []):
            sha = str(entry.get("sha256", ""))
            if sha not in members:
                report.refused.append((sha or "?", "listed in the manifest but not in the bundle"))
                continue
            fh = tar.extractfile(members[sha])
            assert fh is not None
            data = fh.read()
            try:
                if artifact_name(data) != sha:
                    raise ArtifactError("content hash differs from its name")
                header = parse_artifact(data, expected_sha256=sha).header
            except ArtifactError as err:
                report.refused.append((sha, f"integrity: {err.message}"))
                continue
            if header.fingerprint_digest != entry.get("fingerprint_digest"):
                report.refused.append((sha, "the manifest's fingerprint differs from the artifact's own header"))
                continue
            if header.fingerprint_digest != fingerprint_digest and not any_fingerprint:
                report.refused.append((sha, f"made under fingerprint {header.fingerprint_digest[:12]} "
                                            f"(model {entry.get('model_name')}), this engine is {fingerprint_digest[:12]}"))
                continue
            if lib.store.contains(sha):
                report.present += 1
            lib.store.put(data)
            p, s = entry["problem"], entry["solution"]
            row = lib.catalog.deposit(
                ProblemSpec(text=p["text"], id=p["id"], reference=p.get("reference"), source=p.get("source")),
                SolutionSpec(text=s["text"], answer=s["answer"], verdict_status=s["verdict_status"],
                             verdict_reason=s.get("verdict_reason"), deposited_by=s["deposited_by"],
                             unverified=bool(s.get("unverified"))),
                ArtifactSpec(sha256=sha, fingerprint_digest=header.fingerprint_digest,
                             fingerprint_json=json.dumps(header.fingerprint), model_name=str(entry.get("model_name")),
                             token_count=header.token_count, size_bytes=len(data),
                             logits_sha256=header.logits_sha256))
            if row.created:
                report.imported += 1
                if not s.get("unverified") and header.fingerprint_digest == fingerprint_digest:
                    lib.router.add(sha, row.problem.id, row.problem.text, fingerprint_digest)
    return report
