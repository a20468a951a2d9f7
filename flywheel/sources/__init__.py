"""Problem sources: each a module registered under its prefix (see `registry` to add one).

The built-ins load, as plug-ins do, on the first lookup (`flywheel.plugins`), in the order
`describe_sources` lists them: `champ`, `gen:` (the project's families), `gsm-symbolic:`
(GSM-Symbolic templates), and files (the fallback: any spec no prefix claims).
"""

from flywheel.sources.problem import Problem, ProblemSet, set_hash
from flywheel.sources.registry import SOURCES, Loaded, Source, describe_sources, register, resolve, source
from flywheel.sources.spec import Spec

__all__ = ["SOURCES", "Loaded", "Problem", "ProblemSet", "Source", "Spec", "describe_sources", "register", "resolve",
           "set_hash", "source"]
