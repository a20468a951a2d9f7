"""The one checked read of an artifact: whole, what it was asked for, made for what reads it.

Like LMCache's audit backend, the check wraps the stores rather than branching inside each
caller: `CheckedArtifacts.read` is the only place stored artifact bytes are taken unchecked
(`ArtifactStore.get_unchecked`), because `checked_artifact` hashes them once, right there.
Every graft (`Library.load_graft`, `load_raw_graft`), the deposit's "is the stored artifact
current" test and a bundle's staged artifacts go through `checked_artifact`; the graft template
is compared in one place, `check_template`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flywheel.errors import ArtifactNotFoundError, TemplateMismatchError
from flywheel.kv.artifact import Artifact, ArtifactHeader, Buffer, parse_artifact
from flywheel.kv.graft import check_fingerprint
from flywheel.terminal import printable

if TYPE_CHECKING:
    from flywheel.engine import Engine
    from flywheel.store import ArtifactStore


def check_template(header: ArtifactHeader, template: str) -> None:
    """Refuse an artifact prefilled through another graft template than `template` (a prompt format's tag):
    its tokens hold another prompt than the one an attempt would continue."""
    made_with = header.meta.get("template")
    if made_with != template:
        raise TemplateMismatchError(
            f"artifact {header.content_sha256[:12]} was prefilled through graft template "
            f"{printable(made_with or 'unknown', 40)}, this engine asks in {template}",
            hint="re-prefill the library's solutions: flywheel library rebuild")


def checked_artifact(data: Buffer, sha256: str, *, engine: Engine | None = None,
                     template: str | None = None) -> Artifact:
    """Artifact bytes, checked once: content SHA-256 equal to `sha256` (and the format), then prefilled
    through graft template `template` (None: any text, e.g. a bench's raw prefix) under `engine`'s
    fingerprint (None: any setup). Raises a typed `ArtifactError` naming the first defect."""
    artifact = parse_artifact(data, expected_sha256=sha256)
    if template is not None:
        check_template(artifact.header, template)
    if engine is not None:
        check_fingerprint(engine, artifact.header)
    return artifact


class CheckedArtifacts:
    """Stores read only through `checked_artifact`, searched in order (deposits, then composites).

    Example:
        >>> CheckedArtifacts(lib.store).read(sha, engine=engine, template=engine.prompt_format.tag)  # doctest: +SKIP
    """

    def __init__(self, *stores: ArtifactStore) -> None:
        self._stores = stores

    def read(self, sha256: str, *, engine: Engine | None = None, template: str | None = None) -> Artifact:
        """The checked artifact `sha256` (see `checked_artifact`); `ArtifactNotFoundError` if no store holds it."""
        for store in self._stores:
            data = store.get_unchecked(sha256)   # unchecked here only: hashed once, just below
            if data is not None:
                return checked_artifact(data, sha256, engine=engine, template=template)
        raise ArtifactNotFoundError(f"artifact {sha256[:12]} is catalogued but its file is missing",
                                    hint="`flywheel library verify` lists missing files; re-deposit or import them")
