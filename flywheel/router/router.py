"""The router: per problem, `exact` (a recurrence), `near` (a related verified solution), or `none`."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flywheel.catalog import Catalog
from flywheel.config import DEFAULT_NEAR_MEMBERS
from flywheel.domain import ArtifactSha, FingerprintDigest, RouteDecision
from flywheel.errors import ArtifactNotFoundError
from flywheel.router.index import IndexEntry, IndexKind, VectorIndex

Embedder = Callable[[Sequence[str]], np.ndarray]
INDEX_DIR = "index"  # under the library root


@dataclass(frozen=True)
class RouterConfig:
    """Routing thresholds and index choice; frozen, so it can key caches and be recorded."""

    # MiniLM cosine: same-template problems with fresh numbers score ~0.55-0.8 here, unrelated
    # problems < 0.2; 0.5 grafts a related worked example without grafting unrelated ones.
    near_threshold: float = 0.5
    # exact search, right for thousands to tens of thousands of artifacts; "hnsw" lost 3.5% recall@1
    # at 100k (BENCHMARKS.md, Retrieval), so past that an IVF kind (not built yet) is the next step.
    index_kind: IndexKind = "flat"
    hnsw_m: int = 32
    search_k: int = 8  # neighbours examined, so a candidate the catalog no longer vouches for is skipped
    include_unverified: bool = False  # route to --unverified deposits only when asked
    # Related solutions grafted together on a near route (their composite artifact, see
    # Library.composite).
    near_members: int = DEFAULT_NEAR_MEMBERS


@dataclass(frozen=True)
class IndexCheck:
    """How a saved index disagrees with the catalog: what it lacks, what it holds that is gone.

    `unreadable` means a saved index exists but is corrupt or built differently; `absent` that
    none was saved yet (it is built from the catalog on first use: not a disagreement).
    """

    fingerprint: str
    missing: list[str]
    stale: list[str]
    unreadable: bool = False
    absent: bool = False

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.unreadable)


def _default_embedder(texts: Sequence[str]) -> np.ndarray:
    from flywheel.embed import embed

    return embed(texts)


class Router:
    """Routes problems to verified artifacts of the running engine's fingerprint.

    Args:
        root: the library root (a folder); indexes live under `<root>/index/<fingerprint>/`.
        catalog: the open catalog (source of truth; the index is rebuilt from it when stale).
        config: thresholds and index kind.
        embedder: texts -> unit float32 (N, 384); the packaged MiniLM by default.

    Example:
        >>> router = Router(Path("library"), catalog)
        >>> d = router.route("What is 17 * 3?", engine.fingerprint.digest)
        >>> d.kind, d.artifact_sha, round(d.score, 2)
        ('near', '3f9a...', 0.71)
    """

    def __init__(self, root: Path, catalog: Catalog, config: RouterConfig | None = None,
                 embedder: Embedder | None = None, embed_model: str | None = None) -> None:
        from flywheel.embed import EMBED_DIM, EMBED_MODEL_ID

        self.root = Path(root) / INDEX_DIR   # under the library root
        self.catalog = catalog
        self.config = config or RouterConfig()
        self.embedder = embedder or _default_embedder
        self.embed_model = embed_model or EMBED_MODEL_ID
        self.dim = EMBED_DIM
        self._indexes: dict[str, tuple[VectorIndex, tuple[int, int] | None]] = {}
        self._held: set[str] = set()  # fingerprints whose directory lock this instance holds

    # --- routing ---------------------------------------------------------------------------------

    def route(self, problem_text: str, fingerprint: FingerprintDigest, *,
              members: int | None = None) -> RouteDecision:
        """Decide how to seed `problem_text` for an engine whose fingerprint digest is `fingerprint`.

        A near route names the best routable artifact and, with `members` (default
        `config.near_members`) above 1, up to that many routable neighbours above the threshold.
        """
        want = max(1, members if members is not None else self.config.near_members)
        hit = self.catalog.exact_match(problem_text, fingerprint, self.config.include_unverified)
        if hit is not None:
            return RouteDecision("exact", hit.artifact_sha256, 1.0, hit.problem_id)
        index = self._index(fingerprint)
        if not len(index):
            return RouteDecision("none", None, 0.0, None)
        query = self.embedder([problem_text])[0]
        results = index.search(query, max(self.config.search_k, 2 * want))
        best = results[0][0] if results else 0.0
        hits: list[tuple[float, IndexEntry]] = []
        for score, entry in results:
            if score < self.config.near_threshold or len(hits) == want:
                break
            if self._still_routable(entry.artifact_sha256, fingerprint):
                hits.append((score, entry))
        if not hits:
            return RouteDecision("none", None, max(best, 0.0), None)
        score, top = hits[0]
        return RouteDecision("near", top.artifact_sha256, score, top.problem_id,
                             tuple(e.artifact_sha256 for _, e in hits) if len(hits) > 1 else ())

    def _still_routable(self, sha: ArtifactSha, fingerprint: FingerprintDigest) -> bool:
        """Re-check a candidate against the catalog: present, same fingerprint, verified (unless asked).

        Only an artifact removed since indexing is "not a candidate"; a catalog that cannot be
        read (a dropped database, a missing table) raises, rather than reading as "no route".
        """
        try:
            art = self.catalog.get_artifact(sha)
        except ArtifactNotFoundError:
            return False
        if art.fingerprint_digest != fingerprint:
            return False
        if self.config.include_unverified:
            return True
        sol = self.catalog.get_solution(art.solution_id)
        return sol is not None and not sol.unverified

    # --- maintenance -----------------------------------------------------------------------------

    def sync(self, fingerprint: str) -> int:
        """Make the index agree with the catalog: index what it lacks, drop what the catalog no
        longer vouches for. Returns how many entries were added.

        This is the repair after a deposit was interrupted between its catalog commit and its
        index write (`kill -9`, Ctrl-C): every deposit calls it.
        """
        with self._locked(fingerprint):
            return self._reconcile(fingerprint, self._index(fingerprint, reconcile=False))

    def check(self, fingerprint: str) -> IndexCheck:
        """Compare the saved index for `fingerprint` with the catalog, without repairing or building it."""
        directory = self._dir(fingerprint)
        routable = {e.artifact_sha256 for e in self.catalog.router_entries(fingerprint, self.config.include_unverified)}
        if not (directory / "meta.json").exists():
            return IndexCheck(fingerprint, [], [], absent=True)
        saved = VectorIndex.load(directory)
        if saved is None or not self._compatible(saved):
            return IndexCheck(fingerprint, sorted(routable), [], unreadable=True)
        shas = saved.shas()
        return IndexCheck(fingerprint, sorted(routable - shas), sorted(shas - routable))

    def rebuild(self, catalog: Catalog | None = None, fingerprint: str = "") -> int:
        """Rebuild the index for `fingerprint` from the catalog; returns the number of entries."""
        if catalog is not None:
            self.catalog = catalog
        if not fingerprint:
            raise ValueError("rebuild needs the fingerprint digest of the engine it routes for")
        with self._locked(fingerprint):
            entries = self.catalog.router_entries(fingerprint, self.config.include_unverified)
            index = self._empty()
            index.add(self.embedder([e.problem_text for e in entries]) if entries else np.zeros((0, self.dim)),
                      [IndexEntry(e.artifact_sha256, e.problem_id) for e in entries])
            self._save(fingerprint, index)
        return len(entries)

    # --- internals -------------------------------------------------------------------------------

    def _dir(self, fingerprint: str) -> Path:
        if len(fingerprint) != 64 or any(c not in "0123456789abcdef" for c in fingerprint):
            raise ValueError(f"fingerprint digest must be 64 lowercase hex digits, got {fingerprint!r}")
        return self.root / fingerprint

    def _stamp(self, fingerprint: str) -> tuple[int, int] | None:
        try:
            st = os.stat(self._dir(fingerprint) / "meta.json")
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_ino)

    def _empty(self) -> VectorIndex:
        return VectorIndex.empty(self.dim, self.config.index_kind, self.embed_model,
                                 self.config.include_unverified, self.config.hnsw_m)

    def _compatible(self, index: VectorIndex) -> bool:
        return (index.dim == self.dim and index.kind == self.config.index_kind
                and index.embed_model == self.embed_model
                and index.include_unverified == self.config.include_unverified)

    def _agrees(self, index: VectorIndex, fingerprint: str) -> bool:
        routable = self.catalog.router_entries(fingerprint, self.config.include_unverified)
        return index.shas() == {e.artifact_sha256 for e in routable}

    def _reconcile(self, fingerprint: str, index: VectorIndex) -> int:
        """Bring `index` in line with the catalog (call under the lock); returns entries added."""
        entries = self.catalog.router_entries(fingerprint, self.config.include_unverified)
        routable = {e.artifact_sha256 for e in entries}
        known = index.shas()
        if known - routable:  # stale entries: FAISS HNSW cannot remove ids, so rebuild (rare)
            rebuilt = self._empty()
            if entries:
                rebuilt.add(self.embedder([e.problem_text for e in entries]),
                            [IndexEntry(e.artifact_sha256, e.problem_id) for e in entries])
            self._save(fingerprint, rebuilt)
            return len(routable - known)
        missing = [e for e in entries if e.artifact_sha256 not in known]
        if missing:
            index.add(self.embedder([e.problem_text for e in missing]),
                      [IndexEntry(e.artifact_sha256, e.problem_id) for e in missing])
            self._save(fingerprint, index)
        return len(missing)

    def _index(self, fingerprint: str, *, reconcile: bool = True) -> VectorIndex:
        """The in-memory index, reloaded when another process saved a newer one; built if absent.

        A freshly loaded index is compared with the catalog and repaired when they disagree
        (an interrupted deposit), so a run routes over every committed artifact.
        """
        stamp = self._stamp(fingerprint)
        cached = self._indexes.get(fingerprint)
        if cached is not None and cached[1] == stamp:
            return cached[0]
        loaded = VectorIndex.load(self._dir(fingerprint)) if stamp is not None else None
        if loaded is not None and self._compatible(loaded):
            self._indexes[fingerprint] = (loaded, stamp)
            if reconcile and not self._agrees(loaded, fingerprint):
                with self._locked(fingerprint):
                    self._reconcile(fingerprint, self._index(fingerprint, reconcile=False))
                return self._indexes[fingerprint][0]
            return loaded
        with self._locked(fingerprint):  # build once, even when several processes find it missing
            stamp = self._stamp(fingerprint)
            loaded = VectorIndex.load(self._dir(fingerprint)) if stamp is not None else None
            if loaded is not None and self._compatible(loaded):
                self._indexes[fingerprint] = (loaded, stamp)
                if reconcile:
                    self._reconcile(fingerprint, loaded)
                    return self._indexes[fingerprint][0]
                return loaded
            # Absent, corrupt or built differently: the catalog is the source of truth.
            loaded = self._empty()
            entries = self.catalog.router_entries(fingerprint, self.config.include_unverified)
            if entries:
                loaded.add(self.embedder([e.problem_text for e in entries]),
                           [IndexEntry(e.artifact_sha256, e.problem_id) for e in entries])
            self._save(fingerprint, loaded)
        return loaded

    def _save(self, fingerprint: str, index: VectorIndex) -> None:
        directory = self._dir(fingerprint)
        directory.mkdir(parents=True, exist_ok=True)
        index.save(directory)
        self._indexes[fingerprint] = (index, self._stamp(fingerprint))

    @contextmanager
    def _locked(self, fingerprint: str) -> Iterator[None]:
        """An exclusive lock on this fingerprint's index directory, across processes (re-entrant here)."""
        held = self._held
        if fingerprint in held:
            yield
            return
        directory = self._dir(fingerprint)
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / ".lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            held.add(fingerprint)
            try:
                yield
            finally:
                held.discard(fingerprint)
                fcntl.flock(fh, fcntl.LOCK_UN)
