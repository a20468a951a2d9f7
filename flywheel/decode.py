"""Batched decoding: B slots share every weight read, and no slot can see its neighbours in its bits.

Why this is exact per slot (the schedule the rest of the project relies on):

* Every linear layer of the step runs through oneDNN (`mkldnn_linear`) on a copy of its weight
  in oneDNN's layout, on at least `MIN_ROWS` rows (a free slot is a dummy row). Measured on this
  machine (bench/throughput.py, tests/test_decode.py): a row's result depends only on that row,
  not on its neighbours' values, its row index or the row count M >= 2, while PyTorch's default
  CPU path (`F.linear`, MKL) changes a row's bits with M. So a slot's bits do not depend on how
  many slots there are or what they hold; they do differ from the one-sequence MKL path
  (`Engine.decode_one_token`), which is why the kernel path is part of `DecodeSchedule`.
* Attention is computed per slot, on that slot's own keys and values: one fused SDPA call per
  slot and layer, its query heads folded onto their key/value head (`_slot_attention`), no
  mask. Nothing is padded to a neighbour's length, so no reduction's length or order depends on
  the batch.
* Each slot owns preallocated key/value buffers. A sliding-window layer attends to the last
  `window` entries, which is what `DynamicSlidingWindowLayer` hands to attention.

The schedule a slot's bits depend on is `DecodeSchedule` (kernel path, dtype, for sampled
requests the sampler, and whether the calculator may force tokens; the slot count is recorded but
does not change them); it is recorded with
every run and with `verify-graft --slots`, and a run is never resumed under another.

Between steps, the next token of every slot is chosen at once (`Engine.pick_tokens`, see
`flywheel.sampling`): one row-wise max over the step's logits, then each sampled slot draws from
its own row with its own seeded generator.

    >>> decoder = BatchDecoder(engine, slots=8)                        # doctest: +SKIP
    >>> for out in decoder.run(requests):                              # doctest: +SKIP
    ...     print(out.tag, out.stop_reason, len(out.tokens))
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import DynamicSlidingWindowLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from flywheel import calculator, config, grounding
from flywheel.domain import Progress
from flywheel.engine import StopRule
from flywheel.errors import InputError
from flywheel.sampling import SAMPLER

if TYPE_CHECKING:
    from flywheel.engine import Engine

#: The attention implementation name registered with transformers for the slot step.
SLOT_ATTENTION = "flywheel_slots"
#: Names the decode kernel path; bump it when the step's arithmetic changes (it changes bits).
KERNEL_PATH = "slots-v2:onednn-linear+per-slot-sdpa-folded-heads"
#: Rows every step runs at least: oneDNN takes a different (GEMV) path for a single row.
MIN_ROWS = 2
#: Tokens of a slot's tail the calculator reads for `expression =` (longer than any expression it computes).
CALCULATOR_TAIL = 48
#: Most re-picks a grounded slot makes in one step before its first pick stands (flywheel.grounding).
MAX_REPICKS = 32
#: Default slot count on this 2-core machine: measured in bench/throughput.py (BENCHMARKS.md).
DEFAULT_SLOTS = 16

StopReason = Literal["stop", "eos", "budget"]


@dataclass(frozen=True)
class DecodeSchedule:
    """What a slot's decoded tokens depend on, beyond the engine fingerprint and each request's seed.

    `slots` is recorded but does not change a slot's bits; `kernel` and `dtype` change its
    logits, `sampler` the tokens a seed draws from them.
    """

    slots: int
    kernel: str = KERNEL_PATH
    dtype: str = config.DEFAULT_DTYPE
    sampler: str = SAMPLER
    calculator: str | None = None   # `flywheel.calculator.CALCULATOR` when attempts may hand it arithmetic
    grounding: str | None = None    # `flywheel.grounding.GROUNDING` when solutions' numbers are grounded

    #: The fields a run must share with its recorded schedule to be resumed.
    RESULT_KEYS: ClassVar[tuple[str, ...]] = ("kernel", "dtype", "sampler", "calculator", "grounding")

    def to_dict(self) -> dict[str, Any]:
        return {"slots": self.slots, "kernel": self.kernel, "dtype": self.dtype, "sampler": self.sampler,
                "calculator": self.calculator, "grounding": self.grounding}


@dataclass
class DecodeRequest:
    """One attempt to decode: its prefilled cache and next-token logits, and its own rules.

    `cache` is only read (copied into the slot's buffers at admission), so K requests may share
    one prefilled cache: K samples cost one prefill and K decodes.
    """

    cache: DynamicCache
    logits: torch.Tensor           # (vocab,) float32: next-token logits after the prompt
    budget: int                    # most tokens to decode
    stop: StopRule = field(default_factory=StopRule)
    temperature: float = 0.0
    seed: int | None = None
    tag: Any = None                # the caller's handle, returned with the outcome
    keep_logits: bool = False      # keep every step's logits (exactness checks)
    forced: list[int] | None = None  # feed these tokens instead of picking (teacher forcing)
    calculator: bool = False       # exact arithmetic: after `expression =`, feed the result (flywheel.calculator)
    grounding: frozenset[str] | None = None  # the operands a solution may use (flywheel.grounding); None: off


@dataclass
class DecodeOutcome:
    """What one request produced, and why it stopped."""

    tag: Any
    tokens: list[int]
    stop_reason: StopReason
    slot: int
    seconds: float                 # wall time from admission to finish
    joules: float = 0.0            # its share of metered decode steps (with `step_meter`)
    step_logits: list[torch.Tensor] = field(default_factory=list)  # (vocab,) per token, if kept
    tool_tokens: int = 0           # of `tokens`, how many the calculator forced (the rest were picked)


# --- per-slot key/value state ----------------------------------------------------------------------


class _LayerBuffer:
    """One layer of one slot: keys/values (1, kv_heads, capacity, head_dim), `length` filled."""

    __slots__ = ("keys", "values", "length", "window")

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, extra: int, window: int | None) -> None:
        n = keys.shape[-2]
        shape = (*keys.shape[:-2], n + extra, keys.shape[-1])
        self.keys = torch.empty(shape, dtype=keys.dtype, device=keys.device)
        self.values = torch.empty(shape, dtype=values.dtype, device=values.device)
        self.keys[..., :n, :] = keys
        self.values[..., :n, :] = values
        self.length = n
        self.window = window

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store one token's key/value (1, kv_heads, 1, head_dim); return what attention sees."""
        if self.length >= self.keys.shape[-2]:
            raise InputError("a decode slot ran past the capacity it was admitted with")
        self.keys[..., self.length:self.length + 1, :] = key
        self.values[..., self.length:self.length + 1, :] = value
        self.length += 1
        start = 0 if self.window is None else max(0, self.length - self.window)
        return self.keys[..., start:self.length, :], self.values[..., start:self.length, :]


class SlotKV:
    """A slot's whole cache, copied out of a prefilled `DynamicCache` with room for `extra` tokens."""

    def __init__(self, cache: DynamicCache, extra: int) -> None:
        self.layers: list[_LayerBuffer] = []
        self.position = cache.get_seq_length()  # absolute position of the next token
        for layer in cache.layers:
            any_layer: Any = layer   # transformers types layers as a union of mixins
            keys: Any = any_layer.keys
            window = int(layer.sliding_window) if isinstance(layer, DynamicSlidingWindowLayer) else None
            if keys is None:
                raise InputError("cannot decode from an empty cache: prefill a prompt first")
            self.layers.append(_LayerBuffer(keys, any_layer.values, extra, window))


class _StepCache:
    """Stands in for transformers' `Cache` during one slot step: appends each row to its slot.

    The attention layers call `update()`; the per-slot views it stores are what
    `_slot_attention` attends over. The (B, ...) tensors returned are ignored.
    """

    def __init__(self, slots: list[SlotKV | None]) -> None:
        self.slots = slots
        self.visible: dict[int, list[tuple[torch.Tensor, torch.Tensor] | None]] = {}

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        views: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        for i, slot in enumerate(self.slots):   # key_states: (B, kv_heads, 1, head_dim)
            views.append(None if slot is None else
                         slot.layers[layer_idx].append(key_states[i:i + 1], value_states[i:i + 1]))
        self.visible[layer_idx] = views
        return key_states, value_states


def _slot_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention per slot over its own keys; free slots give zeros. query: (B, heads, 1, head_dim).

    Each slot makes one `scaled_dot_product_attention` call with its query heads folded onto
    their key/value head: the `groups` heads that share a key/value head become `groups` query
    rows of that head, (1, kv_heads, groups, head_dim), with no mask. That is the same attention
    as transformers' grouped call (`enable_gqa`), but it runs PyTorch's fused CPU kernel instead
    of its unfused fallback for grouped heads (~25% less per call over 512-1024 keys, measured
    call by call on this machine), so its bits are those of `KERNEL_PATH` slots-v2, not v1's.
    Anything else (a softcap, dropout, wide heads) goes through the integration itself.

    Tried and measured (bench/long_context.py, 2026-12-04): splitting the slots' calls between two
    Python threads made decoding slower (79 vs 106 tok/s on 672-token contexts) and slowed every
    later step of the process too: torch ops from a second thread start a second OpenMP team, and
    its spinning workers take the cores the step's GEMMs need. Keep attention on this thread.
    """
    step: _StepCache = kwargs.pop("slot_step")
    views = step.visible[int(module.layer_idx)]  # type: ignore[arg-type]
    kwargs.pop("sliding_window", None)  # the views already end at the window
    rows, heads, _, head_dim = query.shape
    out = torch.zeros(rows, 1, heads, head_dim, dtype=query.dtype, device=query.device)  # (B, 1, heads, head_dim)
    direct = (kwargs.get("softcap") is None and not kwargs.get("dropout") and head_dim <= 256)
    scaling = kwargs.get("scaling")

    for i, kv in enumerate(views):
        if kv is None:
            continue
        if direct:
            kv_heads = kv[0].shape[1]
            folded = query[i:i + 1].reshape(1, kv_heads, heads // kv_heads, head_dim)  # head h = kv * groups + g
            attn = torch.nn.functional.scaled_dot_product_attention(
                folded, kv[0], kv[1], attn_mask=None, dropout_p=0.0, scale=scaling, is_causal=False)
            out[i] = attn.reshape(1, heads, head_dim)
        else:
            out[i:i + 1] = sdpa_attention_forward(module, query[i:i + 1], kv[0], kv[1], None, **kwargs)[0]
    return out, None


AttentionInterface.register(SLOT_ATTENTION, _slot_attention)


def _mask_marker(engine: Engine, rows: int) -> Any:
    """An attention mask the model passes through untouched (ours ignores it): no mask is built."""
    marker = torch.zeros(rows, 1, 1, 1, dtype=torch.bool, device=engine.device)
    layer_types = getattr(engine.model.config, "layer_types", None)
    return {t: marker for t in set(layer_types)} if layer_types else marker


# --- oneDNN linears, used only inside the slot step ----------------------------------------------

_in_step = threading.local()


def _linear_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if not getattr(_in_step, "active", False):
        return torch.nn.functional.linear(x, self.weight, self.bias)
    rows = x.reshape(-1, x.shape[-1]).contiguous()                   # (M, in)
    packed: Any = self   # the oneDNN copies are attributes `_install_onednn_linears` added
    y = torch._C._nn.mkldnn_linear(rows.to_mkldnn(), packed._flywheel_onednn_weight,
                                   packed._flywheel_onednn_bias).to_dense()
    return y.reshape(*x.shape[:-1], y.shape[-1])


def _install_onednn_linears(engine: Engine) -> None:
    """Give every `nn.Linear` of the model a oneDNN weight copy and a forward that uses it in a step.

    Costs one more copy of the linear weights in memory (Gemma 3 270M: ~1.1 GB, most of it the
    tied 262k-token output projection). Idempotent: an engine is converted once.
    """
    if getattr(engine.model, "_flywheel_onednn", False):
        return
    if not torch.backends.mkldnn.is_available():
        raise InputError("batched decoding needs PyTorch built with oneDNN (mkldnn)",
                         hint="install the project's pinned torch build (make install)")
    with torch.inference_mode():
        for module in engine.model.modules():
            if isinstance(module, torch.nn.Linear):
                module._flywheel_onednn_weight = module.weight.detach().to_mkldnn()  # type: ignore[assignment]
                module._flywheel_onednn_bias = (  # type: ignore[assignment]
                    None if module.bias is None else module.bias.detach().to_mkldnn())
                module.forward = types.MethodType(_linear_forward, module)  # type: ignore[method-assign]
    engine.model._flywheel_onednn = True  # type: ignore[assignment]


# --- the step and the loop -------------------------------------------------------------------------


@torch.inference_mode()
def decode_step(engine: Engine, slots: list[SlotKV | None], tokens: list[int]) -> torch.Tensor:
    """Feed one token to each occupied slot in one model call of len(slots) rows (at least MIN_ROWS).

    Returns float32 logits (B, vocab); rows of free slots are meaningless.
    """
    _install_onednn_linears(engine)
    if len(slots) < MIN_ROWS:
        slots = slots + [None] * (MIN_ROWS - len(slots))
        tokens = tokens + [0] * (MIN_ROWS - len(tokens))
    rows = len(slots)
    pad = engine.tokenizer.pad_token_id or 0
    ids = [tok if slot is not None else pad for slot, tok in zip(slots, tokens, strict=True)]
    positions = [slot.position if slot is not None else 0 for slot in slots]
    input_ids = torch.tensor(ids, dtype=torch.long, device=engine.device)[:, None]          # (B, 1)
    position_ids = torch.tensor(positions, dtype=torch.long, device=engine.device)[:, None]  # (B, 1)
    step = _StepCache(slots)
    config = engine.model.config
    saved = config._attn_implementation
    config._attn_implementation = SLOT_ATTENTION   # under the engine's lock: one step at a time
    _in_step.active = True
    try:
        out = engine.model(input_ids=input_ids, position_ids=position_ids, cache=step, use_cache=True,
                           attention_mask=_mask_marker(engine, rows), logits_to_keep=1, slot_step=step)
    finally:
        _in_step.active = False
        config._attn_implementation = saved
    for slot in slots:
        if slot is not None:
            slot.position += 1
    return out.logits[:, -1].float()   # (B, V)


@dataclass
class _Active:
    request: DecodeRequest
    kv: SlotKV
    generator: torch.Generator | None
    started: float
    tokens: list[int] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)   # the calculator's result, fed before picking again
    tool_tokens: int = 0
    kept: list[torch.Tensor] = field(default_factory=list)
    joules: float = 0.0


#: Runs a callable and returns (its result, joules it took): an energy meter around each step.
StepMeter = Callable[[Callable[[], torch.Tensor]], tuple[torch.Tensor, float]]


class BatchDecoder:
    """Continuous batching over a fixed number of slots; see the module docstring for exactness.

    Example:
        >>> out = next(BatchDecoder(engine, slots=4).run([DecodeRequest(cache, logits, 32)]))  # doctest: +SKIP
        >>> out.stop_reason                                                                  # doctest: +SKIP
        'stop'
    """

    def __init__(self, engine: Engine, slots: int = DEFAULT_SLOTS) -> None:
        if slots < 1:
            raise InputError(f"--slots must be at least 1, got {slots}")
        self.engine = engine
        self.slots = slots
        self.schedule = DecodeSchedule(slots, KERNEL_PATH, engine.settings.dtype, SAMPLER)
        self._eos = engine.eos_ids
        self._has_equals: dict[int, bool] = {}   # token id -> its text contains "=" (the calculator's trigger)
        _install_onednn_linears(engine)
        self.tokens_decoded = 0
        self.model_seconds = 0.0   # in decode steps
        self.pick_seconds = 0.0    # choosing tokens (sampling) between steps
        self.admit_seconds = 0.0   # copying admitted requests' caches into slots
        self.grounding_repicks = 0  # tokens the grounding rules refused (each one picked again)
        self.steps = 0

    def run(self, requests: Iterable[DecodeRequest], *, progress: Progress | None = None,
            step_meter: StepMeter | None = None) -> Iterator[DecodeOutcome]:
        """Decode every request; yields each outcome as soon as its request finishes.

        `requests` is read lazily, one request per free slot, so a caller may prefill at admission
        and may react to earlier outcomes (e.g. skip a problem already solved) before the next one.
        `progress(finished, None, "N decode tok/s")` follows each finished request (the total is
        not known: requests are read lazily).
        """
        pending = iter(requests)
        exhausted = False
        active: list[_Active | None] = [None] * self.slots
        logits: torch.Tensor | None = None   # (rows, vocab): each occupied slot's next-token logits
        finished = 0
        started = time.perf_counter()
        while True:
            for i in range(self.slots):          # continuous batching: fill every free slot
                while active[i] is None and not exhausted:
                    req = next(pending, None)
                    if req is None:
                        exhausted = True
                        break
                    if req.budget <= 0:          # nothing to decode: finished at admission
                        finished += 1
                        yield DecodeOutcome(req.tag, [], "budget", i, 0.0)
                        continue
                    t0 = time.perf_counter()
                    active[i] = self._admit(req)
                    with torch.inference_mode():   # the last step's logits are an inference tensor
                        if logits is None:
                            logits = torch.zeros(max(self.slots, MIN_ROWS), req.logits.shape[-1])
                        logits[i].copy_(req.logits)  # the row a free slot had in the last step is unused
                    self.admit_seconds += time.perf_counter() - t0
            if all(a is None for a in active):
                return
            assert logits is not None
            chosen = self._pick(active, logits)
            feed: list[int] = [0] * self.slots
            for i, a in enumerate(active):
                if a is None:
                    continue
                token = chosen[i]
                a.tokens.append(token)
                self.tokens_decoded += 1
                reason = self._stop_reason(a, token)
                if reason is not None:
                    active[i] = None
                    finished += 1
                    if progress:
                        rate = self.tokens_decoded / max(time.perf_counter() - started, 1e-9)
                        progress(finished, None, f"{rate:.0f} decode tok/s")
                    yield DecodeOutcome(a.request.tag, a.tokens, reason, i, time.perf_counter() - a.started,
                                        a.joules, a.kept, a.tool_tokens)
                    continue
                if a.request.calculator and not a.queued:
                    self._calculate(a, token)
                feed[i] = token
            busy = [a for a in active if a is not None]
            if busy:
                t0 = time.perf_counter()
                kvs = [a.kv if a else None for a in active]
                if step_meter is None:
                    logits, joules = decode_step(self.engine, kvs, feed), 0.0
                else:
                    def step(kvs: list[SlotKV | None] = kvs, feed: list[int] = feed) -> torch.Tensor:
                        return decode_step(self.engine, kvs, feed)
                    logits, joules = step_meter(step)
                self.model_seconds += time.perf_counter() - t0
                self.steps += 1
                for a in busy:
                    a.joules += joules / len(busy)

    def _admit(self, req: DecodeRequest) -> _Active:
        kv = SlotKV(req.cache, extra=req.budget)
        generator = torch.Generator().manual_seed(req.seed) if req.temperature > 0 and req.seed is not None else None
        return _Active(req, kv, generator, time.perf_counter())

    def _pick(self, active: list[_Active | None], logits: torch.Tensor) -> list[int]:
        """Each occupied slot's next token (forced, or picked from its row of `logits`, all rows at once)."""
        t0 = time.perf_counter()
        chosen = [0] * len(active)
        picking: list[int] = []
        for i, a in enumerate(active):
            if a is None:
                continue
            if a.request.keep_logits:
                a.kept.append(logits[i].clone())
            forced = a.request.forced
            if forced:
                chosen[i] = forced[len(a.tokens)]
            elif a.queued:
                chosen[i] = a.queued.pop(0)
                a.tool_tokens += 1
            else:
                picking.append(i)
        if picking:
            rows = logits if picking == list(range(logits.shape[0])) else \
                logits.index_select(0, torch.tensor(picking, dtype=torch.long))
            reqs = [active[i] for i in picking]
            picks = self.engine.pick_tokens(rows, [a.request.temperature for a in reqs if a],
                                            [a.generator for a in reqs if a], [a.tokens for a in reqs if a])
            for i, token in zip(picking, picks, strict=True):
                a = active[i]
                chosen[i] = token if a is None or a.request.grounding is None else self._ground(a, logits[i], token)
        self.pick_seconds += time.perf_counter() - t0
        return chosen

    def _ground(self, a: _Active, row: torch.Tensor, token: int) -> int:
        """`token`, or when the grounding rules refuse it, the slot's next pick from its row without it.

        The re-pick uses only the slot's own logits and generator, so its bits stay its own. After
        `MAX_REPICKS` refusals the first pick stands (the rules step aside rather than stall a slot).
        """
        allowed = a.request.grounding
        assert allowed is not None
        text = self.engine.decode_text(a.tokens)
        candidate, masked = token, None
        for _ in range(MAX_REPICKS):
            if grounding.permits(allowed, text, self.engine.decode_text([*a.tokens, candidate])):
                return candidate
            self.grounding_repicks += 1
            masked = row.clone() if masked is None else masked
            masked[candidate] = float("-inf")
            candidate = self.engine.pick_tokens(masked[None], [a.request.temperature], [a.generator], [a.tokens])[0]
        return token

    def _calculate(self, a: _Active, token: int) -> None:
        """If the slot's text now ends in `expression =`, queue the exact result's tokens (within its budget)."""
        if token not in self._has_equals:
            self._has_equals[token] = "=" in self.engine.decode_text([token])
        if not self._has_equals[token]:
            return
        result = calculator.complete(self.engine.decode_text(a.tokens[-CALCULATOR_TAIL:]))
        if result is not None:
            a.queued = self.engine.encode(result, bos=False)[:max(0, a.request.budget - len(a.tokens))]

    def _stop_reason(self, a: _Active, token: int) -> StopReason | None:
        forced = a.request.forced
        if forced is not None:
            return "budget" if len(a.tokens) >= min(len(forced), a.request.budget) else None
        if token in self._eos:
            return "eos"
        if a.request.stop.should_stop(self.engine, a.tokens):
            return "stop"
        if len(a.tokens) >= a.request.budget:
            return "budget"
        return None
