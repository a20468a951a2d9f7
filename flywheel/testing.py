"""Tiny seeded models for tests and scale benchmarks: real architectures, seconds to build.

`build_tiny_model("gemma3", path)` writes a Gemma-3-style model (sliding-window and full layers,
a small window so tests cross it cheaply) and a byte-level tokenizer into `path`, loadable by
`Engine.load(str(path))` like any local checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch

Kind = Literal["gemma3", "llama", "qwen2"]
#: Small enough that a 64-token prefix already crosses it (the bug it guards appears past it).
TINY_SLIDING_WINDOW = 16


#: A Qwen-style chat template (a default system turn, `<|im_start|>role\n...<|im_end|>\n` turns).
TINY_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}"
    "{%- endif %}{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}")
#: The chat model's control tokens (ids 259 and 260, after the byte tokens).
CHAT_SPECIALS = ("<|im_start|>", "<|im_end|>")


def _byte_tokenizer(path: Path, *, chat: bool = False) -> None:
    """A byte-level BPE tokenizer with no merges: 256 byte tokens plus BOS/EOS/PAD (and, for a chat
    model, `<|im_start|>`/`<|im_end|>` as special tokens, `<|im_end|>` its EOS, and a chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    if chat:
        vocab.update({name: len(vocab) + i for i, name in enumerate(CHAT_SPECIALS)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if chat:   # like Qwen: no BOS, the end of a turn is EOS
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>",
                                       additional_special_tokens=list(CHAT_SPECIALS))
        fast.chat_template = TINY_CHAT_TEMPLATE
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>")
    fast.save_pretrained(path)


def build_tiny_model(kind: Kind, path: Path, *, seed: int = 0, layers: int = 4, hidden: int = 64,
                     max_positions: int = 4096) -> Path:
    """Write a seeded tiny `kind` model + tokenizer to `path` and return it."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    common: dict[str, Any] = dict(vocab_size=259, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=1, head_dim=hidden // 4,
                  max_position_embeddings=max_positions, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                  tie_word_embeddings=True)
    if kind == "qwen2":   # q/k/v biases, 2 key-value heads for 4 query heads, untied output, chat tokens
        from transformers import PretrainedConfig, Qwen2Config

        cfg: PretrainedConfig = Qwen2Config(**{**common, "vocab_size": 261, "num_key_value_heads": 2, "bos_token_id": None,
                             "eos_token_id": 260, "tie_word_embeddings": False, "use_sliding_window": False})
    elif kind == "gemma3":
        # Same interleaving as Gemma 3 (five sliding layers per full one), scaled down.
        layer_types = ["full_attention" if (i + 1) % 3 == 0 else "sliding_attention" for i in range(layers)]
        cfg = Gemma3TextConfig(**common, sliding_window=TINY_SLIDING_WINDOW, layer_types=layer_types,
                               query_pre_attn_scalar=hidden // 4)
    else:
        cfg = LlamaConfig(**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # default init is tiny; widen it so logits differ visibly between tokens
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.08)
    if kind == "qwen2":   # q/k/v biases: nonzero, so a slot that dropped one would differ
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")):
                    p.normal_(0.0, 0.08)
    model.save_pretrained(path, safe_serialization=True)
    _byte_tokenizer(path, chat=kind == "qwen2")
    return path


def add_tiny_blocks(path: Path, types: tuple[str, ...] = ("Q8_0", "Q4_K", "Q6_K")) -> Path:
    """Give a tiny model GGUF-like blocks (as a packaged model has): each linear, in turn of `types`, is
    quantized to int codes x fp16-valued scales (+ offsets for Q4_K), its fp32 weight in `model.safetensors`
    replaced by exactly what the blocks stand for, and the block file written (`flywheel.kernels.prepared`).
    Codes come from rounding here, not from a GGUF file; the layout and numerics are the real ones."""
    import numpy as np
    from safetensors.torch import load_file, save_file

    from flywheel.kernels import blocks as kb
    from flywheel.kernels import prepared

    path = Path(path)
    state = load_file(str(path / "model.safetensors"))
    _, linears = prepared._linear_names(path)
    packed = {}
    for i, name in enumerate(linears):
        key = f"{name}.weight" if f"{name}.weight" in state else "model.embed_tokens.weight"
        w = state[key].numpy().astype(np.float32)
        kind = types[i % len(types)]
        group = 16 if kind == "Q6_K" else 32
        g = w.reshape(w.shape[0], -1, group)
        offsets = None
        if kind == "Q4_K":
            lo, hi = g.min(axis=2), g.max(axis=2)
            scales = ((hi - lo) / 15).astype(np.float16).astype(np.float32)
            offsets = lo.astype(np.float16).astype(np.float32)
            codes = np.clip(np.rint((g - offsets[..., None]) / np.where(scales == 0, 1, scales)[..., None]), 0, 15)
        else:
            top = 127 if kind == "Q8_0" else 31
            scales = (np.abs(g).max(axis=2) / top).astype(np.float16).astype(np.float32)
            codes = np.clip(np.rint(g / np.where(scales == 0, 1, scales)[..., None]), -top - (kind == "Q6_K"), top)
        blocks = kb.Blocks(kind, codes.reshape(w.shape).astype(np.int16), scales, offsets, group)
        state[key] = kb.dequantize(blocks).contiguous()
        packed[name] = kb.pack(blocks)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    prepared.save_blocks(path, packed, "tiny:" + ",".join(types))
    return path
