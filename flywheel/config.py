"""Defaults and the environment variables that override them — one source of truth for each."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

# The environment variables that override the defaults below (each read in one place: here,
# or in the config class that owns the setting).
ENV_LIBRARY = "FLYWHEEL_LIBRARY"
ENV_DB = "FLYWHEEL_DB"
ENV_MODEL = "FLYWHEEL_MODEL"
ENV_MODEL_CACHE = "FLYWHEEL_MODEL_CACHE"
ENV_PROBLEM_CACHE = "FLYWHEEL_PROBLEM_CACHE"
ENV_CPU_WATTS = "FLYWHEEL_CPU_WATTS"          # read by `flywheel.energy.EnergyConfig.from_env`
ENV_ENERGY_SOURCE = "FLYWHEEL_ENERGY_SOURCE"  # likewise

DEFAULT_MODEL = "gemma3-270m"
#: Overrides the model profile's prompt format (`plain` or `chat`), e.g. for a local instruct checkpoint.
ENV_PROMPT_FORMAT = "FLYWHEEL_PROMPT_FORMAT"
DEFAULT_LIBRARY = Path("library")
#: Which weights run the linears (`flywheel.kernels`): `fp32` (the GGUF dequantized, oneDNN), `q-f32a` (the
#: GGUF's blocks, exact weights, fp32 activations) or `q-i8a` (the blocks with per-row int8 activations,
#: integer dot products). `default` names the fastest mode that met the accuracy target (BENCHMARKS.md,
#: "Weights"); a model without GGUF blocks, or a machine that cannot build the kernel, runs fp32.
ENV_WEIGHTS = "FLYWHEEL_WEIGHTS"
WeightsName = Literal["fp32", "q-f32a", "q-i8a"]
WEIGHTS: tuple[WeightsName, ...] = get_args(WeightsName)
DEFAULT_WEIGHTS: WeightsName = "q-i8a"


def weights_name(value: str | None = None) -> str:
    """`value`, else `FLYWHEEL_WEIGHTS`, else `default`; checked (`default` is kept: `resolve_weights` names it)."""
    name = value or os.environ.get(ENV_WEIGHTS) or "default"
    if name != "default" and name not in WEIGHTS:
        from flywheel.errors import InputError

        raise InputError(f"weights {name!r} are not known", hint=f"one of default, {', '.join(WEIGHTS)}")
    return name


def resolve_weights(name: str) -> WeightsName:
    """The mode `name` runs: `default` is `DEFAULT_WEIGHTS`."""
    return DEFAULT_WEIGHTS if name == "default" else name  # type: ignore[return-value]


#: Fixed intra-op thread count: reductions split differently across thread counts, so logits
#: are only reproducible byte for byte under the same count.
DEFAULT_THREADS = 2
#: Decode-token budget per attempt: enough for a short worked solution from a 270M model.
DEFAULT_BUDGET = 160
#: Attempts per problem in a pass: one greedy attempt; more are sampled, attempt k with seed + k.
DEFAULT_ATTEMPTS = 1
#: Base sampling seed of a pass.
DEFAULT_SEED = 0
#: Exact arithmetic in the decode schedule (flywheel.calculator) unless --no-calculator; see BENCHMARKS.md.
DEFAULT_CALCULATOR = False
#: Number-grounded decoding (flywheel.grounding) unless --no-grounding; see BENCHMARKS.md.
DEFAULT_GROUNDING = False
#: Where a pass runs its problems: this process (`thread`), or Dask worker processes (`dask`).
TaskRunnerKind = Literal["thread", "dask"]
TASK_RUNNERS: tuple[TaskRunnerKind, ...] = get_args(TaskRunnerKind)
DEFAULT_TASK_RUNNER: TaskRunnerKind = "thread"
#: Worker processes of the temporary local Dask cluster: one per core of a 2-core machine.
DEFAULT_DASK_WORKERS = 2
#: Engine dtypes a pass runs under: float32, or bfloat16 opt-in (its own fingerprint).
RunDType = Literal["float32", "bfloat16"]
RUN_DTYPES: tuple[RunDType, ...] = get_args(RunDType)
DEFAULT_DTYPE: RunDType = "float32"
#: Most decode slots a pass may ask for (the default is measured: `flywheel.decode.DEFAULT_SLOTS`).
MAX_SLOTS = 256
#: Largest integer the catalog stores in an INTEGER column (PostgreSQL's 32-bit `integer`):
#: budgets, seeds and attempt counts are bounded by it before a run starts, never after decoding.
MAX_DB_INT = 2**31 - 1
#: Most attempts per problem in one pass (they share one prefill and are decoded on the slots).
MAX_ATTEMPTS = 1000
#: Largest decode-token budget per attempt (far above any supported model's window).
MAX_BUDGET = 2**20
#: Largest base sampling seed (attempt k samples with seed + k, stored per attempt).
MAX_SEED = MAX_DB_INT - (MAX_ATTEMPTS - 1)
#: Related verified solutions a near route grafts together (one composite artifact): 1 until
#: measured otherwise (BENCHMARKS.md, "Held-out transfer": 2 and 4 did no better).
DEFAULT_NEAR_MEMBERS = 1
#: Most related verified solutions a near route grafts together (one composite artifact).
MAX_NEAR_MEMBERS = 16

# `flywheel demo` (flows.demo): a slice of CHAMP (recurring, with curated solutions) plus
# generated word problems, small enough for a few minutes on 2 CPU cores.
DEMO_CHAMP = 4          # CHAMP problems
DEMO_PER_FAMILY = 2     # generated problems per word-problem family (10 families), the siblings' templates
DEMO_ATTEMPTS = 4       # sampled attempts per problem in pass 1, sharing one prefill
DEMO_BUDGET = 64        # decode tokens per attempt: a generated worked solution is ~40 tokens
# `flywheel demo --stream DIR` (flows.demo.run_stream_demo): a model that reasons over slices that arrive.
DEMO_STREAM = Path("library/stream")   # the stream `make run` shows: two slices of the project's own families
DEMO_STREAM_MODEL = "qwen2.5-coder-0.5b"
DEMO_STREAM_ATTEMPTS = 2   # attempts until verified: greedy, then one sampled retry only where it failed
DEMO_STREAM_BUDGET = 384   # the 0.5B's verified worked solutions of these families run ~200-300 tokens

# `flywheel study` (flows.study): train passes, then held-out with vs without grafts.
STUDY_PASSES = 2        # train passes over the train set
STUDY_ATTEMPTS = 4      # sampled attempts per unsolved train problem, sharing one prefill
MAX_STUDY_PASSES = 1000  # most train passes asked for (they stop once a pass deposits nothing new)
STUDY_CURATED = 1       # curated worked solutions seeded per family (the study's bound: at most one)
DEFAULT_STARTER = True   # `flywheel run` seeds an empty library with the starter library (flows.starter)
#: Held-out arms (flows.study.ARMS): each name lists its levers (graft: near grafts, calc: the calculator,
#: ground: number-grounded decoding; none: no lever).
STUDY_ARMS = ("none", "graft", "graft+calc", "none+calc", "graft+ground", "graft+calc+ground")
STUDY_DEFAULT_ARMS = ("none", "graft")


def library_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The library root: the `--library` value, else `FLYWHEEL_LIBRARY`, else `./library`."""
    value = explicit or os.environ.get(ENV_LIBRARY) or DEFAULT_LIBRARY
    return Path(value)


def model_name(explicit: str | None = None) -> str:
    """The model: `--model`, else `FLYWHEEL_MODEL`, else the default `gemma3-270m`."""
    return explicit or os.environ.get(ENV_MODEL) or DEFAULT_MODEL


def database_url(library: Path, explicit: str | None = None) -> str:
    """The catalog URL: `--db`, else `FLYWHEEL_DB`, else SQLite inside the library.

    Raises:
        InputError: an explicit or environment URL that is malformed or unsupported (see `validate_db_url`).
    """
    if explicit:
        return validate_db_url(explicit, source="--db")
    value = os.environ.get(ENV_DB)
    if value:
        return validate_db_url(value, source=ENV_DB)
    try:
        path = (library / "catalog.db").resolve()
    except (RuntimeError, OSError) as err:   # a symlink loop
        from flywheel.errors import InputError

        raise InputError(f"library path {library} cannot be resolved: {err}",
                         hint="point --library (FLYWHEEL_LIBRARY) at a folder, not a symlink loop") from None
    return f"sqlite:///{path}"


def _cache_dir(env: str, leaf: str) -> Path:
    """`$env` when set (a folder, created if missing), else `~/.cache/kv-flywheel/<leaf>` (under `XDG_CACHE_HOME`)."""
    value = os.environ.get(env)
    if value:
        path = Path(value)
        if path.exists() and not path.is_dir():
            from flywheel.errors import InputError

            raise InputError(f"{env}={value!r} is not a folder",
                             hint=f"point {env} at a folder (it is created if missing), or unset it")
        return path
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kv-flywheel" / leaf


def model_cache_dir() -> Path:
    """Where prepared (dequantized) models live, shared by every library on this machine."""
    return _cache_dir(ENV_MODEL_CACHE, "models")


def cache_key_path() -> Path:
    """The key that signs cache entries of outside material (`flywheel.cachekey`): this user's, kept apart
    from every cache folder (`$XDG_CONFIG_HOME/kv-flywheel/cache.key`, else `~/.config/...`), so whoever
    can write a cache folder cannot forge an entry this user trusts."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kv-flywheel" / "cache.key"


def problem_cache_dir() -> Path:
    """Where generated problem sets are cached (GSM-Symbolic instances), shared like the model cache:
    `FLYWHEEL_PROBLEM_CACHE`, else `~/.cache/kv-flywheel/problems` (under `XDG_CACHE_HOME` when set)."""
    return _cache_dir(ENV_PROBLEM_CACHE, "problems")


# --- validation (called before anything heavy starts: Prefect, a model, a catalog) ---------------

#: Backends this build can open, with the driver module each needs.
SUPPORTED_DB_BACKENDS = {"sqlite": "sqlite3", "postgresql": "psycopg"}
#: Userinfo passwords and the query keys that carry secrets in a database URL (`?password=...` and friends).
_URL_SECRET = re.compile(r"(?i)(://[^/@:\s]*:)([^@/\s]*)(@)|((?:password|passwd|pass|pwd|secret|sslpassword|token)=)([^&\s]*)")


def redact_url(url: str) -> str:
    """`url` with every password form replaced by `***` (userinfo and secret query keys), for messages.

    Works on strings that do not parse as URLs too, so a malformed value can be echoed safely.

    Example:
        >>> redact_url("postgresql://u:pw@h/db?password=x")
        'postgresql://u:***@h/db?password=***'
    """
    return _URL_SECRET.sub(lambda m: f"{m.group(1)}***{m.group(3)}" if m.group(1) else f"{m.group(4)}***", url)


def url_secrets(url: str) -> list[str]:
    """The secret strings inside `url` (passwords), so a message can be scrubbed of them."""
    from urllib.parse import unquote_plus

    found = [m.group(2) if m.group(1) else m.group(5) for m in _URL_SECRET.finditer(url)]
    return sorted({form for s in found if s for form in (s, unquote_plus(s))}, key=len, reverse=True)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """`text` with each whole occurrence of a secret replaced by `***`.

    Whole: not inside a longer run of letters and digits, so a password `p` masks `p` and
    `:p@`, never the `p` of `port`. Longer secrets are masked first.

    Example:
        >>> mask_secrets("port 1 failed for p", ["p"])
        'port 1 failed for ***'
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", "***", text)
    return text


def sqlite_is_durable(database: str | None, query: dict[str, object]) -> bool:
    """Whether a SQLite URL's database (and query) name a file: not `:memory:`, not empty
    (`sqlite://`, a private temporary database), not a `file:` URI in memory mode."""
    if not database or database == ":memory:":
        return False
    if database.startswith("file:"):
        uri_mode = str(query.get("mode", ""))
        return ":memory:" not in database and "mode=memory" not in database and uri_mode != "memory"
    return True


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite catalog URL names (a `file:` URI's path too); None for other databases."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not sqlite_is_durable(database, dict(parsed.query)):
        return None
    return Path(database[len("file:"):].split("?", 1)[0] if database.startswith("file:") else database)


def validate_db_url(url: str, *, source: str = "--db") -> str:
    """Return `url` if it is a database URL this build can open; else raise `InputError` (no password echoed).

    Checks the syntax, the port, the backend and that its driver is installed, without
    connecting. `source` names where the value came from (`--db`, `FLYWHEEL_DB`).

    Example:
        >>> validate_db_url("sqlite:////tmp/lib/catalog.db")
        'sqlite:////tmp/lib/catalog.db'
    """
    import importlib.util

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from flywheel.errors import InputError

    shown = redact_url(url)
    hint = "give a URL such as sqlite:////abs/path/catalog.db or postgresql+psycopg://user@host:5432/db"
    try:
        parsed = make_url(url)
        port = parsed.port
    except (ArgumentError, ValueError, TypeError) as err:
        why = "has a port that is not a number" if isinstance(err, ValueError) else "is not a database URL"
        raise InputError(f"{source} value {shown!r} {why}", hint=hint) from None
    if port is not None and not 0 < port < 65536:
        raise InputError(f"{source} value {shown!r} has port {port}, outside 1..65535", hint=hint)
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if backend not in SUPPORTED_DB_BACKENDS:
        raise InputError(f"{source} value {shown!r}: database backend {backend!r} is not supported",
                         hint=f"supported: {', '.join(sorted(SUPPORTED_DB_BACKENDS))}; {hint}")
    module = {"sqlite": "sqlite3", "pysqlite": "sqlite3"}.get(driver, driver)
    if backend == "postgresql" and driver != "psycopg":
        raise InputError(f"{source} value {shown!r}: PostgreSQL driver {driver!r} is not the one this build uses",
                         hint="write postgresql+psycopg://... (psycopg 3 is installed with kv-flywheel)")
    if importlib.util.find_spec(module) is None:
        raise InputError(f"{source} value {shown!r} needs the Python module {module!r}, which is not installed",
                         hint=hint)
    if backend == "sqlite" and not sqlite_is_durable(parsed.database, dict(parsed.query)):
        raise InputError(f"{source} value {shown!r} is an in-memory SQLite database: the catalog would vanish "
                         "with the process while its artifacts stay behind", hint=hint)
    if backend == "sqlite" and parsed.database and not parsed.database.startswith("file:") \
            and Path(parsed.database).is_dir():
        raise InputError(f"{source} value {shown!r} names a folder, not a database file", hint=hint)
    return url


def validate_library_path(root: Path, *, write: bool) -> Path:
    """Return `root` if it can serve as a library (writable when `write`); else raise `InputError`.

    A library that does not exist yet is fine when its nearest existing parent is writable.
    A read-only library passes with `write=False` (`ls`, `verify`, `report` inspect it).

    Example:
        >>> validate_library_path(Path("library"), write=True)   # doctest: +SKIP
        PosixPath('library')
    """
    from flywheel.errors import InputError

    if root.exists() and not root.is_dir():
        raise InputError(f"library path {root} is a file, not a folder", hint="point --library at a folder")
    if not write:
        return root
    probe = root
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    targets = [probe] + [p for p in (root / "artifacts", root / "index") if p.exists()]
    for target in targets:
        if not target.is_dir() or not os.access(target, os.W_OK | os.X_OK):
            raise InputError(f"library folder {target} is not writable",
                             hint="fix its permissions, or point --library (FLYWHEEL_LIBRARY) at a writable folder")
    return root
