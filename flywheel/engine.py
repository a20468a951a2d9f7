"""The deterministic inference engine: load a frozen causal LM, prefill, decode.

Exactness is defined against a schedule: the same tokens fed in the same chunks on the same
machine under these settings give bit-identical logits. `Engine` pins every knob that can move
a bit (threads, deterministic algorithms, attention implementation, dtype) and records them in
its `Fingerprint`, which every artifact carries and every graft checks.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, PreTrainedModel

from flywheel import ARTIFACT_FORMAT_VERSION, config, kernels, modelzoo, sampling
from flywheel.domain import FingerprintDigest, canonical_json, json_sha256
from flywheel.errors import InputError, ModelError
from flywheel.prompts import PLAIN, PromptFormat, PromptText, make_format

DType = Literal["float32", "bfloat16", "float16"]
_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_model_locks_guard = threading.Lock()   # creates each model's lock once (`Engine.lock`)


@dataclass(frozen=True)
class EngineSettings:
    """The pinned configuration under which logits are reproducible byte for byte."""

    dtype: DType = config.DEFAULT_DTYPE
    attn_implementation: str = "sdpa"   # fixed: eager and sdpa round differently
    threads: int = config.DEFAULT_THREADS  # fixed: reductions split by thread count
    device: str = "cpu"
    prefill_chunk: int = 256             # the schedule: prefix tokens per forward pass
    #: which weights run the linears (`config.WEIGHTS` or `default`; FLYWHEEL_WEIGHTS, else `default`)
    weights: str = field(default_factory=config.weights_name)


@dataclass(frozen=True)
class Fingerprint:
    """Everything that must match for an artifact's bytes to mean the same thing here."""

    model: str
    weights_sha256: str
    tokenizer_sha256: str
    dtype: str
    attn_implementation: str
    device_type: str
    device_name: str
    threads: int
    torch_version: str
    transformers_version: str
    format_version: int = ARTIFACT_FORMAT_VERSION
    # SHA-256 of the model configuration's computation fields (`config_sha256`); "" in artifacts
    # made before it was recorded, which therefore differ and are refused with the rebuild hint.
    config_sha256: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> FingerprintDigest:
        """SHA-256 of the canonical JSON: the one value catalogs and routers compare."""
        return FingerprintDigest(json_sha256(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def differences(self, other: Fingerprint) -> list[str]:
        """Field names whose values differ, `model` excluded (a renamed model is the same model)."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [k for k in mine if k != "model" and mine[k] != theirs[k]]


#: CPU features the matmul libraries (oneDNN, MKL) and ATen pick kernels by. Two hosts of one model
#: name ("AMD EPYC") can differ in them, and their kernels sum in different orders: different bits.
CPU_KERNEL_FLAGS = ("fma", "avx2", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")
#: Environment variables that cap those libraries' instruction sets.
CPU_ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")


def cpu_isa(cpuinfo: str | None = None) -> str:
    """What picks this CPU's kernels: ATen's dispatch level, the kernel-relevant flags the CPU has, and
    any instruction-set cap set in the environment, e.g. `AVX512 fma avx2 avx512f avx512bw ...`.

    `cpuinfo` is /proc/cpuinfo's text (read when None; absent on other systems: flags then unknown).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    flags_line = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    have = set(flags_line.partition(":")[2].split())
    parts = [torch.backends.cpu.get_cpu_capability()]
    parts += [f for f in CPU_KERNEL_FLAGS if f in have] if flags_line else ["flags-unknown"]
    parts += [f"{k}={os.environ[k]}" for k in CPU_ISA_CAPS if os.environ.get(k)]
    return " ".join(parts)


def device_name(device: torch.device) -> str:
    """A human name for the exact hardware: the GPU name, or the CPU model and what picks its kernels
    (`cpu_isa`, in brackets: a host of the same model name with other instruction sets is another device)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "")
    return " ".join(part for part in (platform.machine(), model, f"[{cpu_isa(cpuinfo)}]") if part)


def apply_determinism(settings: EngineSettings) -> None:
    """Pin the process-wide knobs; idempotent. Must run before the first CUDA call."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    if torch.get_num_threads() != settings.threads:
        torch.set_num_threads(settings.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False


#: An added token that reads as markup (never produced from data text: `Engine.encode_data`).
MARKUP_TOKEN = re.compile(r"<\|[^\s]{1,64}?\|>|<[^\s<>]{1,64}>|\[[^\s\[\]]{1,64}\]")


def _tokenizer_sha256(tokenizer: Any) -> str:
    """Hash the tokenizer's full serialized state (vocab, merges, normalizer, specials)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else canonical_json(tokenizer.get_vocab())
    specials = canonical_json({k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())})
    return hashlib.sha256((body + "\n" + specials).encode()).hexdigest()


#: Configuration keys that do not change what the model computes from loaded weights: where it was
#: loaded from, versions and dtype (fingerprint fields of their own), classification-head labels,
#: runtime output switches, and the initializer (weights are loaded, never initialized). Keys
#: starting with `_` are transformers' bookkeeping. Everything else (rope, epsilons, windows,
#: layer types, softcaps, token ids) is hashed: when in doubt a key is kept.
CONFIG_KEYS_OUTSIDE_COMPUTATION = frozenset({
    "transformers_version", "dtype", "torch_dtype", "architectures", "id2label", "label2id", "problem_type",
    "output_attentions", "output_hidden_states", "return_dict", "use_cache", "initializer_range",
})


def _computation_config(value: Any) -> Any:
    """`value` (a config's `to_dict()`, or a part of it) without the keys outside the computation."""
    if isinstance(value, dict):
        return {str(k): _computation_config(v) for k, v in value.items()
                if not str(k).startswith("_") and k not in CONFIG_KEYS_OUTSIDE_COMPUTATION}
    if isinstance(value, list | tuple):
        return [_computation_config(v) for v in value]
    return value


def config_sha256(model_config: Any) -> str:
    """SHA-256 of the canonical JSON of a model configuration's computation fields.

    Editing `rope_theta`, `sliding_window`, `layer_types` or an epsilon in a checkpoint's
    `config.json` changes it, so artifacts made before the edit are refused.

    Example:
        >>> config_sha256(engine.model.config)   # doctest: +SKIP
        '3f0c...'
    """
    return json_sha256(_computation_config(model_config.to_dict()))


def _weights_sha256(model_dir: Path) -> str:
    """Hash the weight files in name order (what was loaded, not what a config claims).

    Each file's SHA-256 is remembered beside its size, mtime and inode (`modelzoo.file_sha256`):
    an unchanged file is not read again (7 GB for Qwen2.5-Coder 1.5B), a changed one is re-hashed.
    """
    from flywheel.kernels.prepared import BLOCKS_PREFIX

    # the kernel's block file is not the model's weights: it has its own SHA-256 (fingerprint `extra`)
    files = sorted(f for f in model_dir.glob("*.safetensors") if not f.name.startswith(BLOCKS_PREFIX))
    if not files:
        raise ModelError(f"no *.safetensors weights in {model_dir}",
                         hint="only safetensors checkpoints are loaded (no pickle-based .bin files)")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + modelzoo.file_sha256(f).encode())
    return h.hexdigest()


def _weights_to_run(name: str, model_dir: Path, settings: EngineSettings, progress: bool) -> str:
    """The weights mode this load runs: the one asked for; `default` falls back to fp32 (one line) where the
    kernel cannot run or the model has no GGUF blocks, an explicitly named mode is refused there instead."""
    weights = config.resolve_weights(config.weights_name(settings.weights))
    if weights == "fp32":
        return weights
    from flywheel.kernels.prepared import has_blocks

    no_blocks = name not in modelzoo.PACKAGED and not has_blocks(model_dir)
    why = ("it has no GGUF blocks (packaged models have)" if no_blocks else
           "the kernel runs on the CPU only" if settings.device != "cpu" else
           "the kernel needs float32 activations" if settings.dtype != "float32" else kernels.problem())
    if why is None:
        return weights
    if settings.weights != "default":
        raise InputError(f"--weights {weights} cannot run {name}: {why}", hint="use --weights fp32")
    if progress and not no_blocks:
        print(f"[flywheel] running {name} on fp32 weights: {why}", file=sys.stderr, flush=True)
    return "fp32"


def _install_blocks(model: PreTrainedModel, name: str, model_dir: Path, weights: str) -> dict[str, str]:
    """Swap the model's linears for the kernel over its GGUF blocks; what the fingerprint adds (`extra`)."""
    from flywheel.kernels import KERNEL_VERSION, linear, prepared

    prepared.ensure_blocks(name, model_dir)
    packed, sha = prepared.read_blocks(model_dir)
    isa = kernels.variant()
    linear.install(model, packed, weights, isa)
    return {"weights": weights, "kernel": KERNEL_VERSION, "isa": isa, "blocks_sha256": sha}


class Engine:
    """A frozen causal LM under pinned settings.

    Example:
        >>> engine = Engine.load("gemma3-270m")          # doctest: +SKIP
        >>> cache, logits = engine.prefill(engine.encode("2+3="))  # doctest: +SKIP
    """

    def __init__(self, model: PreTrainedModel, tokenizer: Any, fingerprint: Fingerprint,
                 settings: EngineSettings, prompt_format: PromptFormat = PLAIN) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.settings = settings
        self.device = torch.device(settings.device)
        self.prompt_format = prompt_format   # how this model is asked (graft text, attempts, answer markers)

    @classmethod
    def load(cls, name: str | None = None, settings: EngineSettings | None = None, *,
             progress: bool = True, prompt_format: str | None = None) -> Engine:
        """Load `name` (default: `FLYWHEEL_MODEL` or gemma3-270m) under `settings`.

        Args:
            name: packaged model name, local directory, or locally cached HF id.
            settings: the pinned configuration (default `EngineSettings()`).
            progress: show the one-time preparation stages.
            prompt_format: `plain` or `chat` (default: `FLYWHEEL_PROMPT_FORMAT`, else the model
                profile's, see `modelzoo.profile_of`; `plain` for a directory no profile names).
        Returns:
            A ready engine whose `fingerprint` names weights, tokenizer and settings.
        """
        settings = settings or EngineSettings()
        name = config.model_name(name)
        if settings.device.startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"device {settings.device!r} requested but CUDA is not available here")
        apply_determinism(settings)
        transformers.utils.logging.disable_progress_bar()  # our own stage messages say enough
        model_dir = modelzoo.prepare(name, progress=progress)
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                model_dir, local_files_only=True, dtype=_DTYPES[settings.dtype],
                attn_implementation=settings.attn_implementation, use_safetensors=True)
        except (OSError, ValueError) as err:
            raise ModelError(f"could not load {name!r} from {model_dir}: {err}") from err
        model.to(settings.device).eval()  # type: ignore[arg-type]  # transformers types .to() as a wrapper
        model.requires_grad_(False)
        device = torch.device(settings.device)
        fingerprint = Fingerprint(
            model=name if name in modelzoo.PACKAGED else str(model_dir),
            weights_sha256=_weights_sha256(model_dir),
            tokenizer_sha256=_tokenizer_sha256(tokenizer),
            dtype=settings.dtype,
            attn_implementation=model.config._attn_implementation,
            device_type=device.type,
            device_name=device_name(device),
            threads=settings.threads,
            torch_version=torch.__version__,
            transformers_version=transformers.__version__,
            config_sha256=config_sha256(model.config),
        )
        weights = _weights_to_run(name, model_dir, settings, progress)
        if weights != "fp32":
            fingerprint = replace(fingerprint, extra=_install_blocks(model, name, model_dir, weights))
        fmt = prompt_format or os.environ.get(config.ENV_PROMPT_FORMAT) or modelzoo.profile_of(name, model_dir).prompt_format
        return cls(model, tokenizer, fingerprint, replace(settings, weights=weights), make_format(fmt, tokenizer, name))

    @property
    def lock(self) -> threading.RLock:
        """The lock every call into the model holds: one per model, however many engines wrap it.

        `forward` takes it, and so does the batched decoder's step (`flywheel.decode`), which switches
        the model's attention implementation and linear path for the step and restores them before
        it lets go: another thread's call waits for the step and then runs the plain model. Callers
        never need to take it (it is re-entrant, for code that must make several calls in a row).
        """
        model: Any = self.model
        lock = getattr(model, "_flywheel_lock", None)
        if lock is None:
            with _model_locks_guard:
                lock = getattr(model, "_flywheel_lock", None)
                if lock is None:
                    lock = model._flywheel_lock = threading.RLock()
        return lock  # type: ignore[no-any-return]

    # --- text ------------------------------------------------------------------------------------

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        """Token ids of `text`, with the model's BOS token first when it has one."""
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False)
        bos_id = self.tokenizer.bos_token_id
        return ([bos_id] if bos and bos_id is not None else []) + ids

    def encode_prompt(self, pieces: PromptText, *, bos: bool = True) -> list[int]:
        """Token ids of a prompt format's pieces: special-token text is parsed in the format's own
        `control` pieces only; in data (problem, solution, answer) it stays plain text. BOS opens the
        prompt (`bos`) where this engine's format wants the tokenizer's (the plain format does)."""
        ids: list[int] = []
        for piece in pieces:
            if piece.control:
                ids += self.tokenizer.encode(piece.text, add_special_tokens=False) if piece.text else []
            elif piece.text:
                ids += self.encode_data(piece.text)
        bos_id = self.tokenizer.bos_token_id if self.prompt_format.bos else None
        return ([bos_id] if bos and bos_id is not None else []) + ids

    def encode_data(self, text: str) -> list[int]:
        """Token ids of data text (a problem, a solution, an answer): never a control token. Special tokens
        are split as text, and so is every other added token (Qwen's `<tool_call>` is not marked special,
        yet its template gives it meaning): where one occurs, the text goes through the tokenizer's own
        normalizer, pre-tokenizer and model with no added-token matching. Text holding none of them is
        tokenized exactly as before."""
        added = self._added_contents()
        if not any(tok in text for tok in added):
            return list(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))
        backend = self.tokenizer.backend_tokenizer
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
        words = backend.pre_tokenizer.pre_tokenize_str(normalized) if backend.pre_tokenizer is not None else [(normalized, None)]
        return [tok.id for word, _ in words for tok in backend.model.tokenize(word)]

    def _added_contents(self) -> tuple[str, ...]:
        """The tokenizer's added tokens that read as markup (`<tool_call>`, `<|im_end|>`, `<start_of_turn>`,
        `[INST]`, `<0x0A>`): what a template or tool gives meaning. Added plain text (Gemma adds runs of
        spaces and newlines as tokens) is tokenized as the tokenizer always did."""
        cached: tuple[str, ...] | None = getattr(self, "_added", None)
        if cached is None:
            cached = self._added = tuple(t for t in self.tokenizer.get_added_vocab() if MARKUP_TOKEN.fullmatch(t))
        return cached

    def decode_text(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    @property
    def eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id if self.model.generation_config else None
        ids = ids if isinstance(ids, list) else [ids] if ids is not None else []
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return {int(i) for i in ids}

    @property
    def context_window(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    # --- the hot path ----------------------------------------------------------------------------

    def new_cache(self) -> DynamicCache:
        """An empty cache laid out for this model (sliding-window layers where the config says)."""
        return DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def forward(self, ids: Sequence[int], cache: DynamicCache, *, keep: int = 1,
                position_offset: int = 0) -> torch.Tensor:
        """Run `ids` through the model on top of `cache` (mutated); logits of the last `keep`.

        Positions continue from the cache's length (+ `position_offset` for a shifted graft).
        Returns float32 logits of shape (keep, vocab).
        """
        if not ids:
            raise InputError("cannot run the model on zero tokens")
        input_ids = torch.tensor([list(ids)], dtype=torch.long, device=self.device)  # (1, T)
        kwargs: dict[str, Any] = {}
        if position_offset:
            start = cache.get_seq_length() + position_offset
            kwargs["position_ids"] = torch.arange(start, start + len(ids), device=self.device)[None]
        with self.lock:
            out = self.model(input_ids=input_ids, cache=cache, use_cache=True,
                             logits_to_keep=keep, **kwargs)
        return out.logits[0, -keep:].float()  # (keep, V)

    def prefill(self, ids: Sequence[int], cache: DynamicCache | None = None, *,
                chunk: int | None = None, keep: int = 1) -> tuple[DynamicCache, torch.Tensor]:
        """Feed `ids` in chunks of `chunk` tokens (the recorded schedule); last `keep` logits."""
        chunk = chunk or self.settings.prefill_chunk
        cache = cache if cache is not None else self.new_cache()
        logits = torch.empty(0)
        for start in range(0, len(ids), chunk):
            piece = ids[start:start + chunk]
            logits = self.forward(piece, cache, keep=min(keep, len(piece)))
        return cache, logits

    def pick_tokens(self, logits: torch.Tensor, temperatures: Sequence[float],
                    generators: Sequence[torch.Generator | None], produced: Sequence[Sequence[int]]) -> list[int]:
        """The next token of B sequences at once; row b has produced `produced[b]` so far.

        logits: (B, vocab). The one place tokens are chosen (tests script a model by overriding it).
        """
        return sampling.pick_tokens(logits, temperatures, generators)

    def decode_one_token(self, cache: DynamicCache, token: int) -> torch.Tensor:
        """Append one token; returns next-token logits (vocab,)."""
        return self.forward([token], cache, keep=1)[0]


@dataclass(frozen=True)
class StopRule:
    """Stop decoding at EOS, or at a newline once some non-blank text was produced."""

    newline: bool = True
    min_chars: int = 1

    def should_stop(self, engine: Engine, produced: list[int]) -> bool:
        if not self.newline:
            return False
        text = engine.decode_text(produced)
        return "\n" in text and len(text.strip()) >= self.min_chars

