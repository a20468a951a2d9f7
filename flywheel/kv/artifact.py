"""The artifact file format: one safetensors file, no pickle anywhere.

Layout (format version 1):

    [u64 little-endian N][N bytes safetensors JSON header][tensor data]

The safetensors header's `__metadata__` holds one key, `flywheel`, whose value is the JSON
`ArtifactHeader` (format version, fingerprint, token ids, positions, schedule, per-layer state,
logits SHA-256, content SHA-256). Tensors are `layer.{i}.keys` / `layer.{i}.values`, each
(batch=1, kv_heads, cached_tokens, head_dim).

`content_sha256` names the artifact. It is the SHA-256 of

    canonical_json({"header": <header without content_sha256>, "tensors": <safetensors tensor table>})
    + b"\\n" + SHA-256(block 0) + SHA-256(block 1) + ...     # 4 MiB blocks of the tensor data

so every byte that can change what a graft restores — metadata, tensor names, dtypes, shapes,
offsets and data — is covered, and the file can still carry its own name. Hashing the data in
blocks (a one-level SHA-256 tree) lets the blocks be hashed on all cores at once: the check is
paid on every restore, so it must run at memory speed, not at one core's SHA-256 speed.

Reading maps the file privately (copy-on-write) and builds tensors as views of the very bytes
that were hashed, so no second copy of the state is made and nothing unchecked is grafted.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as st_save

from flywheel import ARTIFACT_FORMAT_VERSION
from flywheel.domain import canonical_json
from flywheel.errors import ArtifactIntegrityError, ArtifactMalformedError, ArtifactVersionError
from flywheel.fsutil import atomic_write_bytes

#: A header larger than this is refused before parsing (token ids of a 32k context fit easily).
MAX_HEADER_BYTES = 16 * 1024 * 1024
_META_KEY = "flywheel"
HASH_BLOCK = 4 * 1024 * 1024
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
           "I64": torch.int64, "I32": torch.int32}
_hash_pool: ThreadPoolExecutor | None = None


@dataclass(frozen=True)
class LayerState:
    """What one cache layer needs besides its tensors to resume exactly."""

    kind: str                       # "full" | "sliding"
    cached_tokens: int              # rows in keys/values (sliding layers keep window-1)
    seen_tokens: int                # tokens ever fed (DynamicSlidingWindowLayer.cumulative_length)
    sliding_window: int | None = None


@dataclass(frozen=True)
class ArtifactHeader:
    """Self-description of an artifact; `content_sha256` is empty until sealed."""

    format_version: int
    fingerprint: dict[str, Any]
    fingerprint_digest: str
    token_ids: list[int]
    position_start: int             # own-position graft: positions [start, start + len(token_ids))
    prefill_chunk: int              # the schedule the state was computed under
    layers: list[LayerState]
    logits_sha256: str              # SHA-256 of float32 logits at the last position
    dtype: str
    meta: dict[str, str] = field(default_factory=dict)
    content_sha256: str = ""

    @property
    def token_count(self) -> int:
        return len(self.token_ids)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArtifactHeader:
        try:
            layers = [LayerState(**layer) for layer in data["layers"]]
            return cls(**{**data, "layers": layers})
        except (KeyError, TypeError) as err:
            raise ArtifactMalformedError(f"artifact header is missing or has unknown fields: {err}") from err


@dataclass
class Artifact:
    """A sealed artifact: header plus per-layer tensors. `sha256` is its name."""

    header: ArtifactHeader
    tensors: dict[str, torch.Tensor]
    data: bytes = b""               # the file bytes, once serialized or read

    @property
    def sha256(self) -> str:
        return self.header.content_sha256

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def to_bytes(self) -> bytes:
        if not self.data:
            self.data = _serialize(self.header, self.tensors)
        return self.data

    def write(self, path: Path) -> Path:
        """Write atomically: temp file in the same directory, fsync, rename, fsync the directory."""
        atomic_write_bytes(path, self.to_bytes())
        return path


def logits_sha256(logits: torch.Tensor) -> str:
    """SHA-256 of logits as contiguous float32 bytes on the CPU."""
    return hashlib.sha256(logits.detach().float().cpu().contiguous().numpy().tobytes()).hexdigest()


def seal(header: ArtifactHeader, tensors: dict[str, torch.Tensor]) -> Artifact:
    """Compute the content SHA-256 and return the finished artifact (serialized once more)."""
    unsealed = replace(header, content_sha256="")
    draft = _serialize(unsealed, tensors)
    table, data = _split(draft)
    digest = _content_digest(unsealed.to_json(), table, data)
    sealed = replace(header, content_sha256=digest)
    return Artifact(sealed, tensors, _serialize(sealed, tensors))


def _serialize(header: ArtifactHeader, tensors: dict[str, torch.Tensor]) -> bytes:
    cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    return st_save(cpu, metadata={_META_KEY: canonical_json(header.to_json())})


Buffer = bytes | bytearray | memoryview | mmap.mmap


def _split(data: Buffer) -> tuple[dict[str, Any], memoryview]:
    """Return (tensor table incl. __metadata__, data section) after structural checks."""
    if len(data) < 8:
        raise ArtifactMalformedError(f"artifact is {len(data)} bytes: too short to hold a header (truncated?)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise ArtifactMalformedError(f"artifact header claims {n} bytes but the file has {len(data)} (truncated?)")
    try:
        table = json.loads(bytes(data[8:8 + n]))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArtifactMalformedError(f"artifact header is not JSON: {err}") from err
    if not isinstance(table, dict):
        raise ArtifactMalformedError("artifact header is not a JSON object")
    body = memoryview(data)[8 + n:]
    end = 0
    for name, entry in table.items():
        if name == "__metadata__":
            continue
        try:
            lo, hi = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as err:
            raise ArtifactMalformedError(f"tensor {name!r} has no valid data_offsets") from err
        if not 0 <= lo <= hi:
            raise ArtifactMalformedError(f"tensor {name!r} has inverted offsets")
        end = max(end, hi)
    if end != len(body):
        raise ArtifactMalformedError(
            f"artifact data section is {len(body)} bytes but its tensors need {end} (truncated or padded)")
    return table, body


def _block_digest(block: memoryview) -> bytes:
    return hashlib.sha256(block).digest()  # hashlib releases the GIL on large buffers


def _content_digest(header_json: dict[str, Any], table: dict[str, Any], data: memoryview | bytes) -> str:
    global _hash_pool
    tensors = {k: v for k, v in table.items() if k != "__metadata__"}
    h = hashlib.sha256(canonical_json({"header": header_json, "tensors": tensors}).encode())
    h.update(b"\n")
    view = memoryview(data)
    blocks = [view[i:i + HASH_BLOCK] for i in range(0, len(view), HASH_BLOCK)]
    if len(blocks) > 1:
        if _hash_pool is None:
            _hash_pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                                            thread_name_prefix="kv-hash")
        digests = list(_hash_pool.map(_block_digest, blocks))
    else:
        digests = [_block_digest(b) for b in blocks]
    for d in digests:
        h.update(d)
    return h.hexdigest()


def _tensors_from(table: dict[str, Any], body: memoryview) -> dict[str, torch.Tensor]:
    """Views of `body` as tensors, after checking each entry's dtype, shape and byte length."""
    out: dict[str, torch.Tensor] = {}
    for name, entry in table.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry.get("dtype"))
        shape = entry.get("shape")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ArtifactMalformedError(f"tensor {name!r} has an unsupported dtype or shape")
        lo, hi = entry["data_offsets"]
        count = 1
        for d in shape:
            count *= d
        itemsize = torch.tensor([], dtype=dtype).element_size()
        if count * itemsize != hi - lo:
            raise ArtifactMalformedError(f"tensor {name!r}: shape {shape} does not match its {hi - lo} bytes")
        if count == 0:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            with warnings.catch_warnings():
                # Read-only input (bytes from a store) gives read-only views; grafts never write
                # into restored tensors in place (the cache concatenates into new ones).
                warnings.simplefilter("ignore", UserWarning)
                out[name] = torch.frombuffer(body, dtype=dtype, count=count, offset=lo).reshape(shape)
    return out


def parse_artifact(data: Buffer, expected_sha256: str | None = None) -> Artifact:
    """Check and decode artifact bytes; raises a typed `ArtifactError` on any defect.

    Checks, in order: structure (truncation, JSON), format version, content SHA-256 (and that
    it equals `expected_sha256` when given), then decodes tensors. Nothing is returned unless
    every check passed.
    """
    table, body = _split(data)
    meta = table.get("__metadata__") or {}
    if _META_KEY not in meta:
        raise ArtifactMalformedError("file is safetensors but not a kv-flywheel artifact (no 'flywheel' metadata)")
    try:
        header_json = json.loads(meta[_META_KEY])
    except json.JSONDecodeError as err:
        raise ArtifactMalformedError(f"artifact metadata is not JSON: {err}") from err
    if not isinstance(header_json, dict):
        raise ArtifactMalformedError("artifact metadata is not a JSON object")
    version = header_json.get("format_version")
    if version != ARTIFACT_FORMAT_VERSION:
        raise ArtifactVersionError(
            f"artifact format version {version!r} is not supported (this build reads {ARTIFACT_FORMAT_VERSION})",
            hint="re-deposit the solution with this version (flywheel library rebuild)")
    recorded = str(header_json.get("content_sha256", ""))
    actual = _content_digest({**header_json, "content_sha256": ""}, table, body)
    if actual != recorded:
        raise ArtifactIntegrityError(
            f"artifact content SHA-256 is {actual[:16]}… but its header records {recorded[:16]}…: the file was altered",
            hint="restore it from a bundle or re-deposit; `flywheel library verify` lists every bad artifact")
    if expected_sha256 is not None and not actual.startswith(expected_sha256.lower()):
        raise ArtifactIntegrityError(f"artifact hashes to {actual[:16]}… but {expected_sha256[:16]}… was requested")
    header = ArtifactHeader.from_json(header_json)
    tensors = _tensors_from(table, body)
    return Artifact(header, tensors, data if isinstance(data, bytes) else b"")


def artifact_name(data: Buffer) -> str:
    """The content SHA-256 of artifact bytes, checked against the one they record (a store `Namer`)."""
    table, body = _split(data)
    meta = table.get("__metadata__") or {}
    try:
        header_json = json.loads(meta[_META_KEY])
        recorded = str(header_json["content_sha256"])
    except (KeyError, TypeError, json.JSONDecodeError) as err:
        raise ArtifactMalformedError("bytes are not a kv-flywheel artifact (no readable 'flywheel' header)") from err
    actual = _content_digest({**header_json, "content_sha256": ""}, table, body)
    if actual != recorded:
        raise ArtifactIntegrityError(f"artifact content hashes to {actual[:16]}… but records {recorded[:16]}…")
    return actual


def read_artifact(path: Path, expected_sha256: str | None = None) -> Artifact:
    """Read and fully check an artifact file (see `parse_artifact`)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise ArtifactMalformedError(f"artifact file {path} is empty (truncated?)")
            # Private copy-on-write map: tensors are views of exactly the bytes hashed below.
            mapped = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY)
    except FileNotFoundError as err:
        from flywheel.errors import ArtifactNotFoundError

        raise ArtifactNotFoundError(f"no artifact file at {path}") from err
    return parse_artifact(mapped, expected_sha256)


