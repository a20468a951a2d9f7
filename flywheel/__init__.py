"""kv-flywheel: byte-exact KV-cache artifacts that make a frozen small model smarter and cheaper."""

__version__ = "0.1.0"

#: Bumped whenever the artifact layout changes; older readers refuse newer files and vice versa.
ARTIFACT_FORMAT_VERSION = 1

__all__ = ["ARTIFACT_FORMAT_VERSION", "__version__"]
