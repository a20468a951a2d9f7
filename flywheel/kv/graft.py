"""Capture a cache into an artifact, and graft an artifact back into a fresh cache.

A graft restores every piece of layer state, not just keys and values: a sliding-window layer
(Gemma 3 keeps a 512-token window on 15 of its 18 layers) also carries how many tokens it has
seen, which sets its attention mask and offsets. Restoring keys/values alone is exact up to the
window and wrong past it; `tests/kv/test_graft.py` shows both.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from flywheel.engine import Engine, Fingerprint
from flywheel.errors import ArtifactMalformedError, FingerprintMismatchError
from flywheel.kv.artifact import (
    ARTIFACT_FORMAT_VERSION,
    Artifact,
    ArtifactHeader,
    LayerState,
    logits_sha256,
    seal,
)


class GraftSource(Protocol):
    """Where an attempt gets its graft: the library, or anything that can load an artifact by id."""

    def load_graft(self, engine: Engine, sha256: str) -> Graft:
        """Fetch, check and graft the artifact `sha256`; raises `ArtifactError` if refused."""
        ...


@dataclass
class Graft:
    """A fresh cache holding an artifact's state, ready to continue at `next_position`."""

    cache: DynamicCache
    artifact_sha256: str
    token_count: int
    position_offset: int            # 0 for own-position grafts (the only exact point)

    @property
    def next_position(self) -> int:
        return self.token_count + self.position_offset


def _layer_state(layer: Any) -> LayerState:
    keys: Any = getattr(layer, "keys", None)  # (1, kv_heads, cached_tokens, head_dim); Optional in transformers
    if isinstance(layer, DynamicSlidingWindowLayer):
        return LayerState("sliding", int(keys.shape[-2]), int(layer.cumulative_length), int(layer.sliding_window))
    if type(layer) is DynamicLayer:
        n = int(keys.shape[-2])
        return LayerState("full", n, n)
    raise ArtifactMalformedError(f"cache layer type {type(layer).__name__} cannot be captured yet",
                                 hint="use a model whose cache is DynamicCache with full/sliding layers")


def capture(engine: Engine, cache: DynamicCache, token_ids: list[int], last_logits: torch.Tensor,
            *, prefill_chunk: int | None = None, meta: dict[str, str] | None = None) -> Artifact:
    """Seal the state of `cache` (after prefilling `token_ids`) into an artifact.

    Args:
        engine: the engine that computed the cache (its fingerprint is recorded).
        cache: the prefilled cache; it is read, not modified.
        token_ids: the tokens the cache holds, from position 0.
        last_logits: logits at the last position (their SHA-256 is recorded).
        prefill_chunk: the schedule used (default: the engine's).
        meta: free-form string labels (problem id, template name, ...).
    """
    layers = [_layer_state(layer) for layer in cache.layers]
    if any(layer.seen_tokens != len(token_ids) for layer in layers):
        raise ArtifactMalformedError("cache length does not match the token ids given to capture")
    tensors: dict[str, torch.Tensor] = {}
    live: list[Any] = list(cache.layers)  # transformers types layers as a union of mixins
    for i, layer in enumerate(live):
        tensors[f"layer.{i}.keys"] = layer.keys      # (1, kv_heads, cached_tokens, head_dim)
        tensors[f"layer.{i}.values"] = layer.values
    fp = engine.fingerprint
    header = ArtifactHeader(
        format_version=ARTIFACT_FORMAT_VERSION,
        fingerprint=fp.to_dict(),
        fingerprint_digest=fp.digest,
        token_ids=[int(t) for t in token_ids],
        position_start=0,
        prefill_chunk=prefill_chunk or engine.settings.prefill_chunk,
        layers=layers,
        logits_sha256=logits_sha256(last_logits.reshape(-1)),
        dtype=engine.settings.dtype,
        meta=dict(meta or {}),
    )
    return seal(header, tensors)


def check_fingerprint(engine: Engine, header: ArtifactHeader) -> None:
    """Refuse an artifact computed under anything other than this engine's exact setup."""
    if header.fingerprint_digest == engine.fingerprint.digest:
        return
    theirs = Fingerprint.from_dict(header.fingerprint)
    diffs = engine.fingerprint.differences(theirs) or ["fingerprint digest"]
    detail = ", ".join(f"{k}: artifact {theirs.to_dict().get(k)!r} vs engine {engine.fingerprint.to_dict().get(k)!r}"
                       for k in diffs[:4] if k != "fingerprint digest")
    raise FingerprintMismatchError(
        f"artifact {header.content_sha256[:12]} was computed under another setup ({', '.join(diffs)}) {detail}".strip(),
        hint="re-deposit it for this model and machine (flywheel library rebuild); it is never grafted as is")


def graft(engine: Engine, artifact: Artifact, *, offset: int = 0) -> Graft:
    """Restore `artifact` into a fresh cache of `engine`; nothing is half-grafted.

    With `offset=0` (own position) the continuation's logits equal fresh computation's byte
    for byte. A non-zero `offset` re-rotates every key by `offset` positions (RoPE) — useful
    only to measure how far from exact a shifted graft lands.
    """
    check_fingerprint(engine, artifact.header)
    cache = engine.new_cache()
    if len(cache.layers) != len(artifact.header.layers):
        raise ArtifactMalformedError(
            f"artifact has {len(artifact.header.layers)} layers but the model's cache has {len(cache.layers)}")
    staged: list[tuple[Any, LayerState, torch.Tensor, torch.Tensor]] = []
    for i, (layer, state) in enumerate(zip(cache.layers, artifact.header.layers, strict=True)):
        expected = "sliding" if isinstance(layer, DynamicSlidingWindowLayer) else "full"
        keys, values = artifact.tensors.get(f"layer.{i}.keys"), artifact.tensors.get(f"layer.{i}.values")
        if state.kind != expected or keys is None or values is None or keys.shape[-2] != state.cached_tokens:
            raise ArtifactMalformedError(f"artifact layer {i} ({state.kind}) does not fit the model's {expected} layer")
        staged.append((layer, state, keys.to(engine.device), values.to(engine.device)))
    if offset:
        staged = [(layer, state, _rerotate(engine, i, k, offset), v) for i, (layer, state, k, v) in enumerate(staged)]
    for layer, state, keys, values in staged:   # every check passed: now mutate the fresh cache
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
        if state.kind == "sliding":
            layer.cumulative_length = state.seen_tokens
    return Graft(cache, artifact.sha256, artifact.header.token_count, offset)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rerotate(engine: Engine, layer_idx: int, keys: torch.Tensor, offset: int) -> torch.Tensor:
    """Rotate post-RoPE keys by `offset` more positions: k' = k cos(offset θ) + rot(k) sin(offset θ)."""
    rotary = engine.model.model.rotary_emb
    position = torch.tensor([[offset]], device=keys.device)
    kwargs = {}
    if "layer_type" in inspect.signature(rotary.forward).parameters:
        kwargs["layer_type"] = engine.model.config.layer_types[layer_idx]
    cos, sin = rotary(keys, position, **kwargs)         # (1, 1, head_dim)
    cos, sin = cos[:, None], sin[:, None]               # broadcast over (1, heads, T, head_dim)
    return keys * cos + _rotate_half(keys) * sin
