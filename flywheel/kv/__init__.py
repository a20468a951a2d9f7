"""KV artifacts: the byte-exact, self-describing cache state and its graft into a fresh context."""

from flywheel.kv.artifact import Artifact, ArtifactHeader, logits_sha256, parse_artifact, read_artifact
from flywheel.kv.graft import Graft, GraftSource, capture, graft

__all__ = ["Artifact", "ArtifactHeader", "Graft", "GraftSource", "capture", "graft", "logits_sha256", "parse_artifact",
           "read_artifact"]
