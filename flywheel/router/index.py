"""A persisted FAISS inner-product index over problem embeddings, one per model fingerprint.

Layout under `<library>/index/<fingerprint digest>/`:
  vectors-<sha16>.faiss  the serialized index (int64 ids via IndexIDMap2)
  meta.json              the commit point: embedder, kind, the index file's name and SHA-256,
                         and the id -> (artifact sha, problem id) map
A save writes a new index file, then atomically replaces meta.json, then drops the old file, so a
reader sees either the old or the new state, never a mix. The index is a cache of the catalog.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from flywheel.domain import ArtifactSha
from flywheel.fsutil import atomic_write_bytes

IndexKind = Literal["flat", "hnsw"]


def new_faiss_index(dim: int, kind: IndexKind, hnsw_m: int = 32) -> Any:
    """An empty id-mapped inner-product index: exact `flat`, or approximate `hnsw`."""
    base: Any
    if kind == "flat":
        base = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        base = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
    else:
        raise ValueError(f"unknown index kind {kind!r}")
    return faiss.IndexIDMap2(base)


@dataclass
class IndexEntry:
    artifact_sha256: ArtifactSha
    problem_id: str


@dataclass
class VectorIndex:
    """FAISS index plus the map from its int64 ids to artifacts (in memory)."""

    dim: int
    kind: IndexKind
    embed_model: str
    include_unverified: bool
    faiss_index: Any
    entries: dict[int, IndexEntry] = field(default_factory=dict)
    next_id: int = 0

    @classmethod
    def empty(cls, dim: int, kind: IndexKind, embed_model: str, include_unverified: bool,
              hnsw_m: int = 32) -> VectorIndex:
        return cls(dim, kind, embed_model, include_unverified, new_faiss_index(dim, kind, hnsw_m))

    def __len__(self) -> int:
        return len(self.entries)

    def shas(self) -> set[str]:
        return {e.artifact_sha256 for e in self.entries.values()}

    def add(self, vectors: np.ndarray, entries: list[IndexEntry]) -> None:
        """Add unit vectors (N, dim) float32 with their entries."""
        if len(entries) == 0:
            return
        ids = np.arange(self.next_id, self.next_id + len(entries), dtype=np.int64)
        self.faiss_index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
        for i, e in zip(ids.tolist(), entries, strict=True):
            self.entries[i] = e
        self.next_id += len(entries)

    def search(self, query: np.ndarray, k: int) -> list[tuple[float, IndexEntry]]:
        """Top-k (cosine, entry) for one unit query vector (dim,), best first."""
        if not self.entries:
            return []
        scores, ids = self.faiss_index.search(query.reshape(1, -1).astype(np.float32), min(k, len(self.entries)))
        return [(float(s), self.entries[int(i)]) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]

    # --- persistence -----------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        data = faiss.serialize_index(self.faiss_index).tobytes()
        digest = hashlib.sha256(data).hexdigest()
        name = f"vectors-{digest[:16]}.faiss"
        atomic_write_bytes(directory / name, data)
        meta = {
            "format": 1, "dim": self.dim, "kind": self.kind, "embed_model": self.embed_model,
            "include_unverified": self.include_unverified, "index_file": name, "index_sha256": digest,
            "next_id": self.next_id,
            "entries": [[i, e.artifact_sha256, e.problem_id] for i, e in sorted(self.entries.items())],
        }
        atomic_write_bytes(directory / "meta.json", json.dumps(meta).encode("utf-8"))
        for old in directory.glob("vectors-*.faiss"):
            if old.name != name:
                old.unlink(missing_ok=True)

    @classmethod
    def load(cls, directory: Path) -> VectorIndex | None:
        """The saved index, or None when absent, unreadable or not matching its recorded hash."""
        try:
            meta = json.loads((directory / "meta.json").read_bytes())
            data = (directory / meta["index_file"]).read_bytes()
        except (OSError, ValueError, KeyError):
            return None
        if hashlib.sha256(data).hexdigest() != meta.get("index_sha256"):
            return None
        index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        entries = {int(i): IndexEntry(sha, pid) for i, sha, pid in meta["entries"]}
        if index.ntotal != len(entries):
            return None
        return cls(int(meta["dim"]), meta["kind"], meta["embed_model"], bool(meta["include_unverified"]),
                   index, entries, int(meta["next_id"]))
