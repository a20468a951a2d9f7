"""The prepared block file: every linear weight of a packaged model kept as the GGUF's own blocks.

`write_blocks` reads the GGUF file once (at model preparation), decodes each linear's blocks, checks that
they multiply back to exactly the fp32 weight in the prepared `model.safetensors` (bit for bit; a
mismatch is an error, never a silent approximation), packs them (`blocks.pack`) and writes
`BLOCKS_FILE` beside the fp32 weights with its SHA-256 in `BLOCKS_RECORD`. `read_blocks` loads it back.
A linear whose tensor is not a block type the kernel reads (F16, F32, ...) is left out: it runs fp32.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flywheel.errors import ModelError
from flywheel.kernels import KERNEL_VERSION
from flywheel.kernels.blocks import DECODERS, Packed, decode, dequantize, pack

#: Files of the kernel's packed blocks beside the fp32 weights (never hashed as the model's weights).
BLOCKS_PREFIX = "blocks-"
BLOCKS_FILE = f"{BLOCKS_PREFIX}{KERNEL_VERSION}.safetensors"
BLOCKS_RECORD = f"{BLOCKS_PREFIX}{KERNEL_VERSION}.json"


def _linear_names(model_dir: Path) -> tuple[Any, list[str]]:
    """The model's config and the names of its `nn.Linear` modules, from a weightless (meta) instance."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return model, [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _gguf_names(model: Any) -> dict[str, str]:
    """HF parameter name -> GGUF tensor name, by transformers' own mapping."""
    from transformers.modeling_gguf_pytorch_utils import TensorProcessor, get_gguf_hf_weights_map

    return {hf: gg for gg, hf in get_gguf_hf_weights_map(model, TensorProcessor()).items()}


def _row_order(model_type: str, cfg: Any, gguf_name: str, n: int) -> np.ndarray | None:
    """Rows transformers' loader permutes (Llama's q/k projections are stored in GGUF's rotary order)."""
    if model_type != "llama" or not (".attn_q." in gguf_name or ".attn_k." in gguf_name):
        return None
    heads = cfg.num_attention_heads if ".attn_q." in gguf_name else cfg.num_key_value_heads
    idx = np.arange(n).reshape(heads, n // heads // 2, 2)
    return idx.swapaxes(2, 1).reshape(n)


def write_blocks(gguf_path: Path, model_dir: Path) -> dict[str, Any]:
    """Decode, check and pack every linear of `model_dir` from `gguf_path`; write `BLOCKS_FILE` atomically.

    Returns the record written to `BLOCKS_RECORD` (tensor count, block types, SHA-256 of the file).
    """
    from gguf import GGUFReader
    from safetensors import safe_open

    from flywheel import modelzoo

    model, linears = _linear_names(model_dir)
    names = _gguf_names(model)
    reader = GGUFReader(str(gguf_path))
    tensors = {t.name: t for t in reader.tensors}
    packed: dict[str, Packed] = {}
    with safe_open(str(model_dir / "model.safetensors"), "pt") as fp32:
        keys = set(fp32.keys())
        for name in linears:
            key = f"{name}.weight"
            gguf_name = names.get(key, "")
            if gguf_name not in tensors and key.startswith("lm_head") and getattr(model.config, "tie_word_embeddings", False):
                gguf_name = "token_embd.weight"   # a tied output projection is the embedding's tensor
            tensor = tensors.get(gguf_name)
            weight_key = key if key in keys else "model.embed_tokens.weight" if key.startswith("lm_head") else key
            if tensor is None or tensor.tensor_type.name not in DECODERS or weight_key not in keys:
                continue
            weight = fp32.get_tensor(weight_key)
            n, k = weight.shape
            blocks = decode(tensor.tensor_type.name, np.asarray(tensor.data), n, k)
            order = _row_order(model.config.model_type, model.config, gguf_name, n)
            if order is not None:
                blocks = blocks.permute_rows(order)
            if not torch.equal(dequantize(blocks), weight):
                raise ModelError(f"{name}: the GGUF blocks of {gguf_name} do not reproduce the prepared fp32 weight",
                                 hint="a bug in flywheel/kernels/blocks.py for this block type; run --weights fp32")
            try:
                packed[name] = pack(blocks)
            except ValueError:   # a shape or code the kernel does not take: this linear stays fp32
                continue
    return save_blocks(model_dir, packed, modelzoo.sha256_file(gguf_path))


def save_blocks(model_dir: Path, packed: dict[str, Packed], source_sha256: str) -> dict[str, Any]:
    """Write `packed` as `BLOCKS_FILE` (atomically) and its record `BLOCKS_RECORD`; returns the record."""
    from safetensors.torch import save_file

    from flywheel import modelzoo

    out: dict[str, torch.Tensor] = {}
    meta: dict[str, dict[str, Any]] = {}
    types: dict[str, int] = {}
    for name, p in packed.items():
        out[f"{name}.codes"], out[f"{name}.scales"] = p.codes, p.scales
        if p.offsets.numel():
            out[f"{name}.offsets"] = p.offsets
        meta[name] = {"type": p.type_name, "n": p.n, "k": p.k, "group": p.group}
        types[p.type_name] = types.get(p.type_name, 0) + p.n * p.k
    target = model_dir / BLOCKS_FILE
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    save_file(out, str(tmp), metadata={"kernel": KERNEL_VERSION, "linears": json.dumps(meta, sort_keys=True)})
    record = {"kernel": KERNEL_VERSION, "linears": len(meta), "weights_by_type": types,
              "gguf_sha256": source_sha256, "blocks_sha256": modelzoo.sha256_file(tmp)}
    os.replace(tmp, target)
    (model_dir / BLOCKS_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True))
    return record


def ensure_blocks(name: str, model_dir: Path, *, progress: bool = True) -> None:
    """Write a packaged model's block file if it is missing: the GGUF is located again (SHA-256 checked),
    its linears' blocks decoded, checked against the prepared fp32 weights, packed (`write_blocks`)."""
    import tempfile
    import time

    from flywheel import modelzoo

    if has_blocks(model_dir):
        return
    if name not in modelzoo.PACKAGED:
        raise ModelError(f"{name} has no GGUF blocks (only packaged models do)", hint="use --weights fp32")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=model_dir.parent, prefix=f".{name}-blocks-") as tmp:
        if progress:
            modelzoo._say(f"packing {name}'s GGUF blocks for the kernel (once per machine)")
        record = write_blocks(modelzoo.PACKAGED[name].locate_gguf(Path(tmp)), model_dir)
    if progress:
        modelzoo._say(f"packed {record['linears']} linears of {name} in {time.perf_counter() - started:.0f} s")


def has_blocks(model_dir: Path) -> bool:
    """Whether `model_dir` holds a block file and its record (a packaged model's, or one a test made)."""
    return (model_dir / BLOCKS_FILE).is_file() and (model_dir / BLOCKS_RECORD).is_file()


def read_blocks(model_dir: Path) -> tuple[dict[str, Packed], str]:
    """The packed linears of `model_dir` and the block file's SHA-256 (checked against its record)."""
    from safetensors import safe_open

    from flywheel import modelzoo

    path, record_path = model_dir / BLOCKS_FILE, model_dir / BLOCKS_RECORD
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError) as err:
        raise ModelError(f"{model_dir} has no readable {BLOCKS_RECORD}: {err}",
                         hint="flywheel prepare-model writes it (for a packaged model)") from err
    sha = modelzoo.file_sha256(path)
    if sha != record.get("blocks_sha256"):
        raise ModelError(f"{path} does not match its recorded SHA-256 ({sha[:12]} vs {str(record.get('blocks_sha256'))[:12]})",
                         hint=f"remove {path.name} and {record_path.name}; the next load prepares them again")
    packed: dict[str, Packed] = {}
    with safe_open(str(path), "pt") as f:
        meta = json.loads((f.metadata() or {}).get("linears", "{}"))
        keys = set(f.keys())
        for name, m in meta.items():
            offsets = f.get_tensor(f"{name}.offsets") if f"{name}.offsets" in keys else torch.empty(0, dtype=torch.float32)
            packed[name] = Packed(f.get_tensor(f"{name}.codes"), f.get_tensor(f"{name}.scales"), offsets,
                                  m["n"], m["k"], m["group"], m["type"])
    return packed, sha
