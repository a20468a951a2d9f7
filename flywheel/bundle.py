"""Library bundles: a plain tar of artifacts plus a manifest, to move a library between machines.

Layout:  manifest.json  +  artifacts/<sha256>.kv

Import takes nothing on the bundle's word and is all or nothing:

1. Members. Only `manifest.json` and `artifacts/<64 hex>.kv`, each a regular file, each once;
   anything else (a link, a device, a traversal or unknown path, a duplicate name) refuses the
   bundle. Nothing is ever extracted by the names inside the tar.
2. Bounded work. An artifact member may be at most what an artifact of the importing model can
   be (`max_artifact_bytes`: window x KV bytes per token + the format's header cap), checked
   from the tar header before a byte is read, then from the artifact's own header, and enforced
   while streaming it (1 MiB at a time) into a staging folder; the manifest is bounded by the
   number of artifacts it can describe. A gzip or sparse bomb is refused at constant memory.
3. Entries. Each manifest entry is type-checked and its member listed once. Its artifact is read
   once through the checked read (`flywheel.kv.checked`: content SHA-256 equal to its name) and
   its header fingerprint compared with the manifest's and the engine's (another fingerprint:
   skipped, see below); its graft template must be the engine's (`check_template`). Its texts
   and answer are then judged exactly as a deposit of them would be (`Library.judge`, under
   the importer's `verifier` settings, refused in the same words): the deposit's text limits,
   the problem filed (a problem id may not clash with another text, in the bundle or in the
   library), its catalogued reference, the verifier's verdict (contradicted: refused;
   unverifiable: refused unless `allow_unverified`, then imported marked unverified and never
   routed by default). Last, its token ids must be exactly the engine's encoding of the
   canonical graft text of the problem, solution and answer it is filed under.
4. Commit. Only when every entry passed, through `Library.deposit_staged`: artifact files are
   stored, all catalog rows are committed in one transaction (on failure the newly written
   files are removed), then the index is brought in line with the catalog.

Staging happens in `<library>/.import-<pid>-<random>/`, locked by its importer; a folder left
by a killed import is removed by the next import (`remove_stale_staging`), never a live one's.

Entries made under another fingerprint are not errors: they are skipped (listed in
`ImportReport.skipped`) unless `any_fingerprint`, and never routed here.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
import tarfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from flywheel.errors import (
    ArtifactError,
    BundleRefusedError,
    DepositRefusedError,
    InputError,
    TemplateMismatchError,
)
from flywheel.fsutil import atomic_writer
from flywheel.kv.artifact import MAX_HEADER_BYTES
from flywheel.kv.checked import check_template, checked_artifact
from flywheel.library.deposits import Judgement, StagedDeposit
from flywheel.library.staging import remove_stale_staging, staging_dir
from flywheel.problemsets import Problem
from flywheel.terminal import printable

if TYPE_CHECKING:
    from flywheel.engine import Engine
    from flywheel.kv.artifact import ArtifactHeader
    from flywheel.library import Library
    from verifiers import VerifierConfig

BUNDLE_FORMAT = "kv-flywheel-bundle"
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"
_MEMBER = re.compile(r"^artifacts/([0-9a-f]{64})\.kv$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
#: Most members a bundle may hold (each costs a TarInfo in memory while the bundle is checked).
MAX_MEMBERS = 100_001
#: Manifest bytes allowed per artifact: four texts at the deposit limit, JSON-escaped (6 bytes
#: per character at worst), plus room for hashes and the fingerprint.
_MANIFEST_PER_ENTRY = 4 * 200_000 * 6 + 64 * 1024
_MANIFEST_BASE = 64 * 1024
_CHUNK = 1024 * 1024


@dataclass
class ImportReport:
    """What an import did. `skipped` lists (sha, reason) of entries made under another fingerprint.

    (A refused bundle raises `BundleRefusedError` instead: nothing of it is imported.)
    """

    imported: int = 0
    present: int = 0
    unverified: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def kv_bytes_per_token(engine: Engine) -> int:
    """Keys + values of one token over every layer, in bytes (e.g. 36,864 for Gemma 3 270M fp32)."""
    import torch

    cfg = engine.model.config
    cfg = getattr(cfg, "text_config", None) or cfg
    heads = int(cfg.num_attention_heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    itemsize = torch.tensor([], dtype=engine.model.dtype).element_size()
    return int(cfg.num_hidden_layers) * 2 * kv_heads * head_dim * itemsize


def max_artifact_bytes(engine: Engine) -> int:
    """The largest file an artifact of this engine's model can be: a full window plus the header cap."""
    window = engine.context_window or 131_072
    return 8 + MAX_HEADER_BYTES + window * kv_bytes_per_token(engine)


# --- export --------------------------------------------------------------------------------------


def check_export_target(path: Path, *, force: bool = False, solutions: bool = False) -> None:
    """Refuse an export target before any work: a missing folder, something that is not a file, an
    existing file without `force`, or (for `solutions`) a name `flywheel deposit --file` would not read.

    Raises:
        InputError: with the hint that fixes it.
    """
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: folder {path.parent} does not exist",
                         hint="create the folder first, or give a path in an existing one")
    if path.exists() and not force:
        raise InputError(f"{path} already exists; nothing was written", hint="pass --force to overwrite it")
    if path.exists() and not path.is_file():
        raise InputError(f"{path} is not a file; nothing was written")
    if solutions and path.suffix.lower() != ".jsonl":
        raise InputError(f"{path}: a solutions table is written as JSONL; nothing was written",
                         hint="name it with .jsonl (the suffix `flywheel deposit --file` reads it by)")


def export_bundle(lib: Library, path: Path, *, force: bool = False) -> int:
    """Write every catalogued artifact (verified or not) with its problem and solution; returns the count.

    Raises:
        InputError: as `check_export_target`.
    """
    check_export_target(path, force=force)
    entries: list[dict[str, Any]] = []
    # Durable and all-or-nothing; 0o666 before the umask: a bundle is made to be handed on.
    with atomic_writer(path, mode=0o666) as fh, tarfile.open(fileobj=fh, mode="w") as tar:
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
        _add(tar, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    return len(entries)


def export_solutions(lib: Library, path: Path, *, force: bool = False) -> int:
    """Write each verified solution once as a `flywheel deposit --file` table (JSONL); returns the count.

    Texts only, no artifacts: a few kilobytes where a bundle holds megabytes of KV per entry, and
    no model's: depositing the file prefills every graft again for whichever model deposits it. On
    the model (fingerprint) that made the library, each rebuilt artifact is byte-identical to the
    original (an artifact is the engine's prefill of the canonical graft text of the problem,
    solution and answer, filed under the same id), so its SHA-256 checks the rebuild. Rows keep
    deposit order; `deposited_by` and `source` are written for the reader (`deposit --file` files
    what it deposits as the curator's). Unverified solutions are left out: a deposit would refuse them.

    Raises:
        InputError: as `check_export_target`.

    Example:
        >>> export_solutions(lib, Path("solutions.jsonl"))   # doctest: +SKIP
        27
    """
    check_export_target(path, force=force, solutions=True)
    lines: list[str] = []
    seen: set[int] = set()
    for a in lib.catalog.list_artifacts():   # verified only, oldest first; a solution may have several
        if a.solution_id in seen:
            continue
        seen.add(a.solution_id)
        sol, prob = lib.catalog.get_solution(a.solution_id), lib.catalog.get_problem(a.problem_id)
        assert sol is not None and prob is not None  # foreign keys guarantee both
        lines.append(json.dumps({"id": prob.id, "problem": prob.text, "solution": sol.text, "answer": sol.answer,
                                 "reference": prob.reference or "", "source": prob.source,
                                 "deposited_by": sol.deposited_by}, ensure_ascii=False, sort_keys=True))
    with atomic_writer(path, mode=0o666) as fh:
        fh.write("".join(line + "\n" for line in lines).encode())
    return len(lines)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


# --- import: members -----------------------------------------------------------------------------


_LAYOUT_HINT = "a bundle holds manifest.json and artifacts/<sha256>.kv, as written by `flywheel library export`"


def _refuse(message: str, hint: str | None = None) -> BundleRefusedError:
    return BundleRefusedError(f"{message}; nothing was imported", hint=hint)


def _members(tar: tarfile.TarFile, limit: int) -> tuple[tarfile.TarInfo, dict[str, tarfile.TarInfo]]:
    """Walk member headers once (no data read): names, types, duplicates, sizes, count."""
    artifacts: dict[str, tarfile.TarInfo] = {}
    manifest: tarfile.TarInfo | None = None
    count = 0
    while True:
        try:
            m = tar.next()
        except (tarfile.TarError, OSError, EOFError) as err:
            raise _refuse(f"bundle is damaged after {count} members: {err}") from None
        if m is None:
            break
        count += 1
        name = printable(m.name, 120)
        if count > MAX_MEMBERS:
            raise _refuse(f"bundle holds more than {MAX_MEMBERS - 1:,} artifacts")
        if not m.isreg() or m.issparse():
            raise _refuse(f"bundle member {name!r} is not a regular file (links, devices and sparse files are refused)")
        if m.name == MANIFEST:
            if manifest is not None:
                raise _refuse(f"bundle holds {MANIFEST} twice")
            manifest = m
        elif (match := _MEMBER.match(m.name)) is not None:
            if match.group(1) in artifacts:
                raise _refuse(f"bundle holds {name!r} twice")
            if m.size > limit:
                raise _refuse(f"bundle member {name!r} is {m.size:,} bytes, more than an artifact of this model "
                              f"can be ({limit:,})")
            artifacts[match.group(1)] = m
        else:
            raise _refuse(f"bundle holds an unknown or unsafe path {name!r}", _LAYOUT_HINT)
    if manifest is None:
        raise _refuse(f"bundle has no {MANIFEST}", _LAYOUT_HINT)
    return manifest, artifacts


def _read_manifest(tar: tarfile.TarFile, info: tarfile.TarInfo, n_artifacts: int) -> list[Any]:
    limit = _MANIFEST_BASE + n_artifacts * _MANIFEST_PER_ENTRY
    if info.size > limit:
        raise _refuse(f"{MANIFEST} is {info.size:,} bytes, more than {n_artifacts} artifacts can need ({limit:,})")
    fh = tar.extractfile(info)
    assert fh is not None
    try:
        manifest = json.loads(fh.read(info.size).decode("utf-8"))  # info.size <= limit, checked above
    except UnicodeDecodeError as err:
        raise _refuse(f"{MANIFEST} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except (json.JSONDecodeError, RecursionError) as err:
        raise _refuse(f"{MANIFEST} is not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT \
            or manifest.get("version") != BUNDLE_VERSION:
        raise _refuse(f"{MANIFEST} is not a kv-flywheel bundle manifest of a version this build reads "
                      f"(format {BUNDLE_FORMAT!r}, version {BUNDLE_VERSION})")
    entries = manifest.get("artifacts")
    if not isinstance(entries, list):
        raise _refuse(f"{MANIFEST} has no list of artifacts")
    return entries


def _stage(tar: tarfile.TarFile, info: tarfile.TarInfo, dest: Path, limit: int) -> None:
    """Stream a member to `dest`, checking its size against its own artifact header on the way."""
    src = tar.extractfile(info)
    assert src is not None
    with open(dest, "wb") as out:
        head = _read_exact(src, 8)
        (n,) = struct.unpack("<Q", head) if len(head) == 8 else (-1,)
        if not 0 < n <= MAX_HEADER_BYTES or 8 + n > info.size:
            raise ArtifactError(f"artifact header length {n} is impossible for a {info.size:,}-byte member")
        table_bytes = _read_exact(src, n)
        try:
            table = json.loads(table_bytes)
            end = max([int(e["data_offsets"][1]) for k, e in table.items() if k != "__metadata__"], default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise ArtifactError(f"artifact header is not a readable tensor table ({err})") from None
        if 8 + n + end != info.size or info.size > limit:
            raise ArtifactError(f"artifact header describes {8 + n + end:,} bytes but the member is {info.size:,}")
        out.write(head)
        out.write(table_bytes)
        written = 8 + n
        while chunk := src.read(min(_CHUNK, info.size - written)):
            written += len(chunk)
            if written > info.size:  # pragma: no cover - tarfile never reads past a member
                raise ArtifactError("member is longer than its header says")
            out.write(chunk)
        if written != info.size:
            raise ArtifactError(f"member ends after {written:,} of {info.size:,} bytes (truncated bundle)")


def _read_exact(src: IO[bytes], n: int) -> bytes:
    data = src.read(n)
    if len(data) != n:
        raise ArtifactError(f"member ends after {len(data)} of the {n} bytes its header needs (truncated)")
    return data


# --- import: entries -----------------------------------------------------------------------------


def _text(obj: dict[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}.{key} is {'missing' if value is None else type(value).__name__}, not text")
    return value


def _parse_entry(entry: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if not isinstance(entry, dict):
        raise ValueError("entry is not an object")
    sha = entry.get("sha256")
    if not isinstance(sha, str) or not _SHA.match(sha):
        raise ValueError("sha256 is missing or not 64 lowercase hex digits")
    if not isinstance(entry.get("fingerprint_digest"), str):
        raise ValueError("fingerprint_digest is missing or not text")
    p, s = entry.get("problem"), entry.get("solution")
    if not isinstance(p, dict) or not isinstance(s, dict):
        raise ValueError("problem and solution must be objects")
    problem = {"id": _text(p, "id", "problem"), "text": _text(p, "text", "problem"),
               "reference": _text(p, "reference", "problem", optional=True),
               "source": _text(p, "source", "problem", optional=True)}
    if not problem["id"] or not str(problem["id"]).strip():
        raise ValueError("problem.id is empty")
    unverified = s.get("unverified", False)
    if not isinstance(unverified, bool):
        raise ValueError("solution.unverified is not true/false")
    solution = {"text": _text(s, "text", "solution"), "answer": _text(s, "answer", "solution"),
                "deposited_by": _text(s, "deposited_by", "solution", optional=True) or "import",
                "unverified": unverified}
    return sha, problem, solution


@dataclass(frozen=True)
class _Entry:
    """One manifest entry, type-checked: its artifact id, problem and solution fields, as the bundle says."""

    number: int
    sha: str
    problem: dict[str, Any]
    solution: dict[str, Any]
    fingerprint_digest: str
    model_name: Any

    @property
    def label(self) -> str:
        return f"bundle entry {self.number} (problem {printable(self.problem['id'], 60)!r}, artifact {self.sha[:12]})"

    def refused(self, why: str, hint: str | None = None) -> BundleRefusedError:
        return _refuse(f"{self.label}: {why}", hint)

    def as_problem(self) -> Problem:
        p = self.problem
        return Problem(id=p["id"], text=p["text"], reference=p["reference"], source=p["source"] or "")


def _entry(number: int, raw: Any, listed: set[str], members: dict[str, tarfile.TarInfo]) -> _Entry:
    """The manifest entry `raw`, checked for structure and against the bundle's members (each listed once)."""
    try:
        sha, problem, solution = _parse_entry(raw)
    except ValueError as err:
        raise _refuse(f"bundle entry {number}: {err}") from None
    entry = _Entry(number, sha, problem, solution, raw["fingerprint_digest"], raw.get("model_name"))
    if sha in listed:
        raise entry.refused("the artifact is listed twice")
    listed.add(sha)
    if sha not in members:
        raise entry.refused("listed in the manifest but not in the bundle")
    if any("\x00" in value for value in (problem["source"] or "", solution["deposited_by"])):  # a bundle's own fields
        raise entry.refused("a text contains a NUL character")
    return entry


def _read_staged(tar: tarfile.TarFile, info: tarfile.TarInfo, dest: Path, limit: int, entry: _Entry) -> ArtifactHeader:
    """Stage a member's bytes at `dest`, then read them once through the checked read (named by their hash)."""
    try:
        _stage(tar, info, dest, limit)
        return checked_artifact(dest.read_bytes(), entry.sha).header
    except ArtifactError as err:
        raise entry.refused(f"integrity: {err.message}") from None
    except (tarfile.TarError, OSError, EOFError) as err:
        raise entry.refused(f"unreadable member: {err}") from None


def _made_here(engine: Engine, header: ArtifactHeader, entry: _Entry) -> bool:
    """Whether the artifact was made under `engine`'s fingerprint; refuses a header the manifest misdescribes
    or one longer than the window."""
    if header.fingerprint_digest != entry.fingerprint_digest:
        raise entry.refused("the manifest's fingerprint differs from the artifact's own header")
    window = engine.context_window
    if window and header.token_count > window:
        raise entry.refused(f"the artifact holds {header.token_count:,} tokens, more than the {window:,}-token window")
    return header.fingerprint_digest == engine.fingerprint.digest


def _check_template(engine: Engine, header: ArtifactHeader, entry: _Entry) -> None:
    try:
        check_template(header, engine.prompt_format.tag)
    except TemplateMismatchError as err:   # another template's text: not "altered", just old
        raise entry.refused(err.message, hint="import it with the build that exported it, run "
                                              "`flywheel library rebuild`, and export again") from None


def _check_tokens(engine: Engine, header: ArtifactHeader, problem: Problem, entry: _Entry) -> None:
    """The artifact's tokens must be the graft text of the problem, solution and answer it is filed under
    (checkable when it was made with this engine's tokenizer)."""
    fp = engine.fingerprint
    if header.fingerprint_digest != fp.digest and header.fingerprint.get("tokenizer_sha256") != fp.tokenizer_sha256:
        return
    s = entry.solution
    if header.token_ids != engine.encode_prompt(engine.prompt_format.graft([(problem.text, s["text"], s["answer"])])):
        raise entry.refused("its tokens are not the graft text of the problem, solution and answer it is filed under",
                            hint="the bundle was altered; import only bundles written by `flywheel library export`")


@dataclass
class _BundleFiling:
    """Where a bundle's problems go, consistent across its entries and with the library."""

    ids: dict[str, str] = field(default_factory=dict)       # problem id -> text hash, within the bundle
    by_text: dict[str, str] = field(default_factory=dict)   # text hash -> first problem id, within the bundle
    refs: dict[str, str] = field(default_factory=dict)      # problem id -> its reference ("" none), within the bundle

    def file(self, lib: Library, problem: Problem) -> Problem:
        """`problem` under the id it is filed as: the library's (`filed_as`), else the bundle's first id for its text.

        Raises:
            DepositRefusedError: its id holds another text in the bundle or in the library.
        """
        from flywheel.catalog.normalize import text_hash

        digest = text_hash(problem.text)
        if self.ids.setdefault(problem.id, digest) != digest:
            raise DepositRefusedError("the problem id is used twice in the bundle with different texts")
        existing = lib.catalog.get_problem(problem.id)
        if existing is not None:
            if existing.text_hash != digest:
                raise DepositRefusedError(f"the library's problem {printable(problem.id, 60)!r} holds a different text",
                                          hint="import into another library, or rename the problem in the bundle")
            return problem
        first = self.by_text.setdefault(digest, problem.id)   # the same text under another id is the same problem
        filed = lib.filed_as(problem)
        return replace(filed, id=first) if filed.id == problem.id else filed

    def check_reference(self, problem: Problem) -> None:
        """Refuse a second, different reference for a problem the bundle already gave one."""
        reference = (problem.reference or "").strip()
        if self.refs.setdefault(problem.id, reference) != reference:
            raise DepositRefusedError(
                f"the bundle gives problem {printable(problem.id, 60)!r} two different references "
                f"({printable(self.refs[problem.id], 40)!r} and {printable(reference, 40)!r})")


def _judge(lib: Library, engine: Engine, entry: _Entry, filing: _BundleFiling, *,
           verifier: VerifierConfig | None, allow_unverified: bool) -> Judgement:
    """The entry judged as a deposit of it would be (`Library.judge`: same rules, settings and words)."""
    s = entry.solution
    try:
        judged = lib.judge(entry.as_problem(), s["text"], s["answer"], engine.prompt_format, verifier=verifier,
                           allow_unverified=allow_unverified, file_as=lambda p: filing.file(lib, p))
        filing.check_reference(judged.problem)
    except DepositRefusedError as err:
        raise entry.refused(err.message, err.hint) from None
    return judged


def _staged_deposit(entry: _Entry, header: ArtifactHeader, judged: Judgement, staged: Path, size: int, *,
                    ours: bool) -> StagedDeposit:
    from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec

    s, verdict = entry.solution, judged.verdict
    return StagedDeposit(
        staged,
        ProblemSpec.of(judged.problem),
        SolutionSpec(text=s["text"], answer=s["answer"], verdict_status=verdict.status, verdict_reason=verdict.reason,
                     deposited_by=s["deposited_by"], unverified=not judged.verified),
        ArtifactSpec(sha256=entry.sha, fingerprint_digest=header.fingerprint_digest,
                     fingerprint_json=json.dumps(header.fingerprint), model_name=_model_name(header, entry),
                     token_count=header.token_count, size_bytes=size, logits_sha256=header.logits_sha256),
        routable=ours and judged.verified)


def _check_entries(lib: Library, engine: Engine, tar: tarfile.TarFile, entries: list[Any],
                   members: dict[str, tarfile.TarInfo], staging: Path, limit: int, *,
                   verifier: VerifierConfig | None, any_fingerprint: bool, allow_unverified: bool,
                   report: ImportReport) -> list[StagedDeposit]:
    """Every check of every entry, in the order of the module docstring; raises `BundleRefusedError`
    naming the first bad one."""
    listed: set[str] = set()
    filing = _BundleFiling()
    checked: list[StagedDeposit] = []
    for number, raw in enumerate(entries, start=1):
        entry = _entry(number, raw, listed, members)
        staged = staging / f"{entry.sha}.kv"
        header = _read_staged(tar, members[entry.sha], staged, limit, entry)
        ours = _made_here(engine, header, entry)
        if not ours and not any_fingerprint:
            report.skipped.append((entry.sha, f"made under fingerprint {header.fingerprint_digest[:12]} "
                                              f"(model {printable(entry.model_name, 60)}), "
                                              f"this engine is {engine.fingerprint.digest[:12]}"))
            staged.unlink()
            continue
        _check_template(engine, header, entry)
        judged = _judge(lib, engine, entry, filing, verifier=verifier, allow_unverified=allow_unverified)
        _check_tokens(engine, header, judged.problem, entry)
        checked.append(_staged_deposit(entry, header, judged, staged, members[entry.sha].size, ours=ours))
    unlisted = sorted(set(members) - listed)
    if unlisted:
        raise _refuse(f"bundle holds artifacts/{unlisted[0][:12]}….kv, which its manifest does not list")
    return checked


def _model_name(header: ArtifactHeader, entry: _Entry) -> str:
    name = header.fingerprint.get("model") or entry.model_name or "unknown"
    return str(name)[:255]


#: What a bundle's first bytes are: gzip, bzip2 or xz magic, or a POSIX/GNU tar header ("ustar" at 257).
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_TAR_MAGIC_AT = 257


def _check_bundle_file(path: Path) -> bool:
    """Refuse at once what is not a regular file starting like a (compressed) tar: a device such as
    /dev/zero, a FIFO, or a file of zeros would keep a decompressor reading (padding) to its end.
    Returns whether the bundle is compressed."""
    import stat

    try:
        st = os.stat(path)
    except OSError as err:
        raise _refuse(f"{printable(path)} is not a readable bundle: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(f"{printable(path)} is not a regular file (a device, FIFO or folder is never a bundle)")
    try:
        with open(path, "rb") as fh:
            head = fh.read(_TAR_MAGIC_AT + 5)
    except OSError as err:
        raise _refuse(f"{printable(path)} is not a readable bundle: {err.strerror or err}") from None
    if not (head.startswith(_COMPRESSED_MAGIC) or head[_TAR_MAGIC_AT:] == b"ustar"):
        raise _refuse(f"{printable(path)} is not a bundle: it starts like no tar, gzip, bzip2 or xz file",
                      _LAYOUT_HINT)
    return head.startswith(_COMPRESSED_MAGIC)


#: Zero bytes in a row that compressed data never holds: past them a file is padding (which the
#: gzip and xz readers skip to the end of the file, however large) or not compressed data at all.
MAX_ZERO_RUN = 1 << 20


class _NoZeroPadding(io.RawIOBase):
    """A compressed bundle's bytes, read through: a run of more than `MAX_ZERO_RUN` zero bytes
    raises `OSError` (a 20 GB sparse tail of "stream padding" would otherwise be read to its end)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._zeros = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._zeros = 0
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        stripped = data.rstrip(b"\x00")
        self._zeros = self._zeros + n if not stripped else n - len(stripped)
        if self._zeros > MAX_ZERO_RUN:
            raise OSError(f"more than {MAX_ZERO_RUN:,} zero bytes in a row: padding, not compressed data")
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


# --- import: the whole -------------------------------------------------------------------------


def import_bundle(lib: Library, path: Path, engine: Engine, *, any_fingerprint: bool = False,
                  allow_unverified: bool = False, verifier: VerifierConfig | None = None) -> ImportReport:
    """Check a bundle completely, then import all of it or nothing (see the module docstring).

    Args:
        lib: the library to import into.
        path: the bundle (tar, optionally compressed).
        engine: the importing engine: its tokenizer re-checks token ids, its model bounds sizes.
        any_fingerprint: also import artifacts made under other fingerprints (never routed here).
        allow_unverified: import answers the verifier cannot check, marked unverified.
        verifier: the verifier settings answers are checked under, as for `Library.deposit` (its defaults when None).
    Returns:
        counts of imported and already-present artifacts, and the skipped other-fingerprint ones.
    Raises:
        BundleRefusedError: any bad member or entry; the library is exactly as it was.

    Example:
        >>> import_bundle(lib, Path("bundle.tar"), engine).imported     # doctest: +SKIP
        3
    """
    limit = max_artifact_bytes(engine)
    compressed = _check_bundle_file(path)
    with open(path, "rb") as raw:
        try:
            tar = tarfile.open(fileobj=_NoZeroPadding(raw) if compressed else raw, mode="r:*")
        except (tarfile.TarError, OSError, EOFError) as err:
            why = "not a tar file (plain, gzip, bzip2 or xz)" if isinstance(err, tarfile.ReadError) else str(err)
            raise _refuse(f"{printable(path)} is not a readable bundle: {why}") from None
        report = ImportReport()
        remove_stale_staging(lib.root)
        # Staged inside the library (same filesystem, its free space); removed whatever happens.
        with tar, staging_dir(lib.root) as staging:
            manifest_info, members = _members(tar, limit)
            entries = _read_manifest(tar, manifest_info, len(members))
            checked = _check_entries(lib, engine, tar, entries, members, staging, limit, verifier=verifier,
                                     any_fingerprint=any_fingerprint, allow_unverified=allow_unverified,
                                     report=report)
            done = lib.deposit_staged(checked, fingerprint=engine.fingerprint.digest)
    report.imported = done.created
    report.present = done.already_stored
    report.unverified = sum(c.solution.unverified for c in checked)
    return report
