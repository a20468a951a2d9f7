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
* Each slot owns key/value buffers that grow as it fills them (`KV_GROW`, doubling), up to what
  it was admitted with; attention reads a view of the filled entries, so where they sit changes
  no bit. A sliding-window layer attends to the last `window` entries, which is what
  `DynamicSlidingWindowLayer` hands to attention, and keeps no more than about twice that.
* A request's prompt (the question after its graft, or a whole plain prompt) is prefilled in the
  steps too (`Prompt`): its slot feeds up to `PREFILL_CHUNK` prompt tokens as rows of the same
  packed call, beside the other slots' decode tokens, attending over its own buffers with a
  causal (and sliding-window) mask. Admission stops no slot, and a prompt's bits, like a decode
  token's, are its own: they do not depend on what shares the step. They do depend on the chunk
  size (where each chunk's key range ends), which is part of `KERNEL_PATH`.

The schedule a slot's bits depend on is `DecodeSchedule` (kernel path, dtype, for sampled
requests the sampler, and whether the calculator may force tokens; the slot count is recorded but
does not change them); it is recorded with
every run and with `verify-graft --slots`, and a run is never resumed under another.

The K attempts of a problem share one `Prompt`: the first to take a slot feeds it, the others
wait in their slots (or are admitted later) and start from a copy of its buffers.

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
from contextlib import contextmanager
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
#: Prompt tokens a slot feeds in one step: a request's prompt is prefilled in the batched step, beside
#: the other slots' decode tokens, at most this many per step (its attention's key ranges, so its bits,
#: depend on where the chunks end: part of `KERNEL_PATH`).
PREFILL_CHUNK = 64
#: Names the decode kernel path; bump it when the step's arithmetic changes (it changes bits).
KERNEL_PATH = f"slots-v3:onednn-linear+per-slot-sdpa-folded-heads+step-prefill-{PREFILL_CHUNK}"
#: Rows every step runs at least: oneDNN takes a different (GEMV) path for a single row. A model whose
#: linears all run the qgemm kernel (`flywheel.kernels`: the same path for every M) needs no dummy row.
MIN_ROWS = 2


def min_rows(engine: Engine) -> int:
    """`MIN_ROWS`, or 1 where no oneDNN linear is left in the model (`Engine.load` with quantized weights)."""
    return 1 if not any(isinstance(m, torch.nn.Linear) for m in engine.model.modules()) else MIN_ROWS
#: Tokens of a slot's tail the calculator reads for `expression =` (longer than any expression it computes).
CALCULATOR_TAIL = 48
#: Most re-picks a grounded slot makes in one step before its first pick stands (flywheel.grounding).
MAX_REPICKS = 32
#: Entries a slot's layer buffer holds beyond its cache at admission, and grows by at least (it doubles
#: as it fills): memory follows what a slot has used, not its budget (a budget at the window times 16
#: slots would otherwise be allocated up front). Changes no bit: attention reads the filled entries only.
KV_GROW = 256
#: Default slot count on this 2-core machine: measured in bench/throughput.py (BENCHMARKS.md).
DEFAULT_SLOTS = 16
#: Seconds between `BatchDecoder.run`'s heartbeats while no request finishes (a first attempt of hundreds
#: of tokens on a large model takes minutes: its caller is told the decoder is working).
PROGRESS_EVERY_S = 30.0

StopReason = Literal["stop", "eos", "budget"]


class _Later:
    """What a request source yields for "nothing to admit yet, more may come" (`LATER`)."""

    def __repr__(self) -> str:
        return "LATER"


#: Yielded by a request source instead of a request: the free slot stays free this step and the source is
#: asked again at the next (e.g. an attempt that waits for a verdict on the last one). A decoder with
#: every slot free polls it every `LATER_POLL_S` seconds.
LATER = _Later()
LATER_POLL_S = 0.005


_CALCULATOR, _GROUNDING = calculator.CALCULATOR, grounding.GROUNDING   # the schedule's names for both tools
_checked_calculator = calculator.checked   # (`of_run`'s argument shadows the module)


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
    #: which weights ran the linears (`EngineSettings.weights`: fp32 through oneDNN, or a qgemm mode). Recorded
    #: for the reader; a resume compares the engine fingerprint first, which names them (`extra`).
    weights: str = "fp32"

    #: The fields a run must share with its recorded schedule to be resumed.
    RESULT_KEYS: ClassVar[tuple[str, ...]] = ("kernel", "dtype", "sampler", "calculator", "grounding")

    @classmethod
    def of_run(cls, slots: int, dtype: str, *, calculator: bool | str, grounding: bool,
               weights: str = "fp32") -> DecodeSchedule:
        """The one place a schedule is built: what a pass records, `verify-graft --slots` reports,
        and replay and resume compare (`RESULT_KEYS`). The decoder refuses requests outside it.
        `calculator`: True for this version's (`flywheel.calculator.CALCULATOR`), or a recorded run's
        version by name (one of `flywheel.calculator.VERSIONS`, as replay passes it)."""
        tool = _checked_calculator(calculator) if isinstance(calculator, str) else (_CALCULATOR if calculator else None)
        return cls(slots, KERNEL_PATH, dtype, SAMPLER, tool, _GROUNDING if grounding else None, weights)

    def to_dict(self) -> dict[str, Any]:
        return {"slots": self.slots, "kernel": self.kernel, "dtype": self.dtype, "sampler": self.sampler,
                "calculator": self.calculator, "grounding": self.grounding, "weights": self.weights}


@dataclass(eq=False)
class Prompt:
    """Tokens to prefill in the batched step on top of `cache` (a restored graft, or empty) before decoding.

    Requests that share one `Prompt` (the K attempts of a problem) share its prefill: the first
    one admitted feeds the tokens, `PREFILL_CHUNK` per step; the others wait in their slots and
    start from a copy of its state once the last chunk has run (or at admission, if it has).
    `logits` is then the first next-token row; `seconds` the wall of the steps that fed it.
    """

    cache: DynamicCache
    ids: list[int]
    logits: torch.Tensor | None = None         # (vocab,) once prefilled
    seconds: float = 0.0
    joules: float = 0.0
    _state: SlotKV | None = field(default=None, repr=False)   # the feeding slot's cache; once done, frozen

    @property
    def done(self) -> bool:
        return self.logits is not None


@dataclass
class DecodeRequest:
    """One attempt to decode: its prefilled cache and next-token logits, or a `Prompt` to prefill first.

    `cache` is only read (copied into the slot's buffers at admission), so K requests may share
    one prefilled cache: K samples cost one prefill and K decodes. With `prompt`, `cache` and
    `logits` are unused (the prompt's own cache and the step's logits are).
    """

    cache: DynamicCache | None
    logits: torch.Tensor | None    # (vocab,) float32: next-token logits after the prompt
    budget: int                    # most tokens to decode
    stop: StopRule = field(default_factory=StopRule)
    temperature: float = 0.0
    seed: int | None = None
    tag: Any = None                # the caller's handle, returned with the outcome
    keep_logits: bool = False      # keep every step's logits (exactness checks)
    forced: list[int] | None = None  # feed these tokens instead of picking (teacher forcing)
    calculator: bool = False       # exact arithmetic: after `expression =`, feed the result (flywheel.calculator)
    grounding: frozenset[str] | None = None  # the operands a solution may use (flywheel.grounding); None: off
    prompt: Prompt | None = None   # prefill these in the step first (shared by the forks that hold it)


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
    """One layer of one slot: keys/values (1, kv_heads, capacity, head_dim), the first `length` filled.

    The buffer holds what attention may still read, and grows as it fills: to twice its capacity,
    at least `KV_GROW` entries more, never past the `limit` entries the slot was admitted with (its
    cache, prompt and budget). So a slot holds about what it has used, not its whole budget. A
    sliding-window layer keeps its last `window - 1` entries when it grows (what attention can still
    reach) and stays under about twice its window. Growing copies the filled entries into a new
    tensor and never writes the old one: attention reads a view of the filled entries (the same
    values, the same shape, wherever they sit), so it changes no bit, and a view taken earlier
    (`SlotKV.frozen`) stays what it was.
    """

    __slots__ = ("keys", "values", "length", "window", "stored", "limit")

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, extra: int, window: int | None) -> None:
        n = keys.shape[-2]
        self.length = self.stored = n     # entries in the buffer; entries stored in all
        self.limit = n + extra            # the most entries this slot may store
        self.window = window
        self.keys, self.values = keys, values
        self._reallocate(keep=n, capacity=min(self.limit, n + KV_GROW))

    def _reallocate(self, keep: int, capacity: int) -> None:
        """Move the last `keep` filled entries into new tensors of `capacity` entries."""
        shape = (*self.keys.shape[:-2], capacity, self.keys.shape[-1])
        keys = torch.empty(shape, dtype=self.keys.dtype, device=self.keys.device)
        values = torch.empty(shape, dtype=self.values.dtype, device=self.values.device)
        keys[..., :keep, :] = self.keys[..., self.length - keep:self.length, :]
        values[..., :keep, :] = self.values[..., self.length - keep:self.length, :]
        self.keys, self.values, self.length = keys, values, keep

    def _grow(self, t: int) -> None:
        """Make room for `t` more entries (the caller checked they are within `limit`)."""
        keep = self.length if self.window is None else min(self.length, self.window - 1)
        need = keep + t
        capacity = max(2 * self.keys.shape[-2], need, keep + KV_GROW)
        if self.window is not None:
            capacity = min(capacity, max(need, 2 * self.window))
        self._reallocate(keep, min(capacity, keep + self.limit - self.stored))

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Store T tokens' keys/values (1, kv_heads, T, head_dim); return what attention sees, from where.

        The view starts where the first of the T queries' window starts (the whole buffer for a
        full-attention layer); `_slot_attention` masks the rest for T > 1.
        """
        t = key.shape[-2]
        if self.stored + t > self.limit:
            raise InputError("a decode slot ran past the capacity it was admitted with")
        if self.length + t > self.keys.shape[-2]:
            self._grow(t)
        self.keys[..., self.length:self.length + t, :] = key
        self.values[..., self.length:self.length + t, :] = value
        self.length += t
        self.stored += t
        start = 0 if self.window is None else max(0, self.length - t + 1 - self.window)
        return self.keys[..., start:self.length, :], self.values[..., start:self.length, :], start

    @property
    def nbytes(self) -> int:
        """Bytes its buffers hold (filled or not)."""
        return self.keys.untyped_storage().nbytes() + self.values.untyped_storage().nbytes()


class SlotKV:
    """A slot's whole cache, copied out of a prefilled `DynamicCache` with room for `extra` tokens.

    An empty cache (an ungrafted prompt) gives empty buffers shaped from the model's `config`, in `dtype`.
    """

    def __init__(self, cache: DynamicCache, extra: int, *, config: Any = None,
                 dtype: torch.dtype = torch.float32) -> None:
        self.layers: list[_LayerBuffer] = []
        self.position = cache.get_seq_length()  # absolute position of the next token
        for layer in cache.layers:
            any_layer: Any = layer   # transformers types layers as a union of mixins
            keys: Any = any_layer.keys
            values: Any = any_layer.values
            window = int(layer.sliding_window) if isinstance(layer, DynamicSlidingWindowLayer) else None
            if keys is None:
                if config is None:
                    raise InputError("cannot decode from an empty cache: prefill a prompt first")
                keys = values = _empty_kv(config, dtype)
            self.layers.append(_LayerBuffer(keys, values, extra, window))

    def frozen(self) -> SlotKV:
        """This cache as it is now, without a copy, to fork from later (`fork`).

        Its layers are views of the filled entries: this slot writes only past them, and growing
        replaces its tensors instead of writing them, so the views keep what they hold now.
        """
        kv = SlotKV.__new__(SlotKV)
        kv.position = self.position
        kv.layers = []
        for layer in self.layers:
            view = _LayerBuffer.__new__(_LayerBuffer)
            view.keys, view.values = layer.keys[..., :layer.length, :], layer.values[..., :layer.length, :]
            view.length = view.stored = view.limit = layer.length
            view.window = layer.window
            kv.layers.append(view)
        return kv

    @classmethod
    def fork(cls, source: SlotKV, extra: int) -> SlotKV:
        """A copy of `source` (a `frozen` cache) with room for `extra` more tokens."""
        kv = cls.__new__(cls)
        kv.position = source.position
        kv.layers = [_LayerBuffer(layer.keys[..., :layer.length, :], layer.values[..., :layer.length, :],
                                  extra, layer.window) for layer in source.layers]
        return kv

    @property
    def nbytes(self) -> int:
        """Bytes its key/value buffers hold."""
        return sum(layer.nbytes for layer in self.layers)


def _empty_kv(config: Any, dtype: torch.dtype) -> torch.Tensor:
    """A layer's empty key (or value) tensor, (1, kv_heads, 0, head_dim), for the model `config`."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return torch.empty(1, config.num_key_value_heads, 0, head_dim, dtype=dtype)


class _StepCache:
    """Stands in for transformers' `Cache` during one slot step: appends each slot's rows to its buffers.

    The step's rows are packed, (1, N, ...): slot i's `counts[i]` rows follow slot i-1's (a free or
    waiting slot has one dummy row). The attention layers call `update()`; the per-slot views it
    stores are what `_slot_attention` attends over. The tensors returned are ignored.
    """

    def __init__(self, slots: list[SlotKV | None], counts: list[int]) -> None:
        self.slots = slots
        self.counts = counts
        self.visible: dict[int, list[tuple[torch.Tensor, torch.Tensor, int] | None]] = {}

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        views: list[tuple[torch.Tensor, torch.Tensor, int] | None] = []
        row = 0
        for slot, n in zip(self.slots, self.counts, strict=True):   # key_states: (1, kv_heads, N, head_dim)
            views.append(None if slot is None else
                         slot.layers[layer_idx].append(key_states[:, :, row:row + n], value_states[:, :, row:row + n]))
            row += n
        self.visible[layer_idx] = views
        return key_states, value_states


def _prompt_mask(rows: int, keys: int, start: int, window: int | None) -> torch.Tensor:
    """Which of a view's `keys` (buffer entries `start`...) each of the last `rows` entries attends to:
    itself and before it, within the layer's window. (rows, keys) bool."""
    end = start + keys
    query = torch.arange(end - rows, end)[:, None]   # buffer index of each query
    key = torch.arange(start, end)[None, :]
    mask = key <= query
    if window is not None:
        mask &= key > query - window
    return mask


def _slot_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention per slot over its own keys; free slots give zeros. query: (1, heads, N, head_dim), packed.

    Each slot makes one `scaled_dot_product_attention` call with its query heads folded onto
    their key/value head: the `groups` heads that share a key/value head become `groups` query
    rows of that head, (1, kv_heads, groups, head_dim), with no mask. That is the same attention
    as transformers' grouped call (`enable_gqa`), but it runs PyTorch's fused CPU kernel instead
    of its unfused fallback for grouped heads (~25% less per call over 512-1024 keys, measured
    call by call on this machine). A slot feeding T > 1 prompt tokens folds them the same way,
    (1, kv_heads, groups * T, head_dim), with a causal (and sliding-window) mask over its view.
    Anything else (a softcap, dropout, wide heads) goes through the integration itself.

    Tried and measured (bench/long_context.py, 2026-12-04): splitting the slots' calls between two
    Python threads made decoding slower (79 vs 106 tok/s on 672-token contexts) and slowed every
    later step of the process too: torch ops from a second thread start a second OpenMP team, and
    its spinning workers take the cores the step's GEMMs need. Keep attention on this thread.
    """
    step: _StepCache = kwargs.pop("slot_step")
    layer = int(module.layer_idx)  # type: ignore[arg-type]
    views = step.visible[layer]
    kwargs.pop("sliding_window", None)  # the views already start at the window
    _, heads, n_rows, head_dim = query.shape
    out = torch.zeros(1, n_rows, heads, head_dim, dtype=query.dtype, device=query.device)  # (1, N, heads, head_dim)
    direct = (kwargs.get("softcap") is None and not kwargs.get("dropout") and head_dim <= 256)
    scaling = kwargs.get("scaling")
    row = 0
    for slot, kv, t in zip(step.slots, views, step.counts, strict=True):
        r, row = row, row + t
        if kv is None or slot is None:
            continue
        keys, values, start = kv
        mask = None if t == 1 else _prompt_mask(t, keys.shape[-2], start, slot.layers[layer].window)
        q = query[:, :, r:r + t, :]                                   # (1, heads, t, head_dim)
        if direct:
            kv_heads = keys.shape[1]
            groups = heads // kv_heads
            folded = q.reshape(1, kv_heads, groups * t, head_dim)    # head h = kv * groups + g, then token
            attn = torch.nn.functional.scaled_dot_product_attention(
                folded, keys, values, attn_mask=None if mask is None else mask.repeat(groups, 1),
                dropout_p=0.0, scale=scaling, is_causal=False)
            out[0, r:r + t] = attn.reshape(heads, t, head_dim).transpose(0, 1)
        else:
            out[0, r:r + t] = sdpa_attention_forward(module, q, keys, values,
                                                     None if mask is None else mask[None, None], **kwargs)[0][0]
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


def onednn_dtype_problem(dtype: torch.dtype) -> str | None:
    """Why oneDNN's linear cannot run `dtype` on this CPU (bf16 needs AVX512-BF16-class or AVX-NE-CONVERT
    support; AVX2-only hosts have neither), or None when it can."""
    try:
        w = torch.zeros(2, 2, dtype=dtype).to_mkldnn()
        torch._C._nn.mkldnn_linear(torch.zeros(2, 2, dtype=dtype).to_mkldnn(), w, None)
    except RuntimeError as err:
        return str(err).splitlines()[0]
    return None


def _min_rows_of(engine: Engine) -> int:
    """`min_rows`, computed once per model (a walk over its modules)."""
    model: Any = engine.model
    rows = getattr(model, "_flywheel_min_rows", None)
    if rows is None:
        rows = model._flywheel_min_rows = min_rows(engine)
    return int(rows)


def _install_onednn_linears(engine: Engine) -> None:
    """Give every `nn.Linear` of the model a oneDNN weight copy and a forward that uses it in a step.

    Costs one more copy of the linear weights in memory (Gemma 3 270M: ~1.1 GB, most of it the
    tied 262k-token output projection). Idempotent: an engine is converted once, under its lock.
    Outside a step (`_slot_step`) the new forward is `nn.Linear`'s own.
    """
    if getattr(engine.model, "_flywheel_onednn", False):
        return
    if not torch.backends.mkldnn.is_available():
        raise InputError("batched decoding needs PyTorch built with oneDNN (mkldnn)",
                         hint="install the project's pinned torch build (make install)")
    why = onednn_dtype_problem(engine.model.dtype)
    if why:
        raise InputError(f"batched decoding in {str(engine.model.dtype).removeprefix('torch.')} is not possible "
                         f"on this CPU: {why}", hint="use --dtype float32 here")
    with engine.lock, torch.inference_mode():
        if getattr(engine.model, "_flywheel_onednn", False):   # another thread converted it meanwhile
            return
        for module in engine.model.modules():
            if isinstance(module, torch.nn.Linear):
                module._flywheel_onednn_weight = module.weight.detach().to_mkldnn()  # type: ignore[assignment]
                module._flywheel_onednn_bias = (  # type: ignore[assignment]
                    None if module.bias is None else module.bias.detach().to_mkldnn())
                module.forward = types.MethodType(_linear_forward, module)  # type: ignore[method-assign]
    engine.model._flywheel_onednn = True  # type: ignore[assignment]


@contextmanager
def _slot_step(engine: Engine) -> Iterator[None]:
    """Everything a step switches, switched and restored under the engine's lock (`Engine.lock`).

    The model's attention implementation (process-wide: its config) becomes the slot attention and
    this thread's linears take the oneDNN path; both are back before the lock is let go, so a call
    on another thread (`Engine.forward`) waits for the step and runs the plain model.
    """
    with engine.lock:
        config = engine.model.config
        saved = config._attn_implementation
        config._attn_implementation = SLOT_ATTENTION
        _in_step.active = True
        try:
            yield
        finally:
            _in_step.active = False
            config._attn_implementation = saved


# --- the step and the loop -------------------------------------------------------------------------


@torch.inference_mode()
def decode_step(engine: Engine, slots: list[SlotKV | None], feeds: list[list[int]]) -> torch.Tensor:
    """Feed each occupied slot its tokens (one decode token, or a chunk of its prompt) in one model call.

    The rows are packed, (1, N): slot i's `feeds[i]` in order, one dummy row for a free slot or
    one that feeds nothing, at least MIN_ROWS rows in all. Returns float32 logits (len(slots),
    vocab): each slot's last row (rows of free slots, and of prompt chunks before the last, are
    meaningless).
    """
    _install_onednn_linears(engine)
    rows_at_least = _min_rows_of(engine)
    pad = engine.tokenizer.pad_token_id or 0
    ids: list[int] = []
    positions: list[int] = []
    counts: list[int] = []
    live: list[SlotKV | None] = []
    for slot, feed in zip(slots, feeds, strict=True):
        if slot is None or not feed:
            ids.append(pad)
            positions.append(0)
            counts.append(1)
            live.append(None)
            continue
        ids += feed
        positions += range(slot.position, slot.position + len(feed))
        counts.append(len(feed))
        live.append(slot)
    last = (torch.tensor(counts).cumsum(0) - 1).tolist()   # each slot's last row: its logits
    while len(ids) < rows_at_least:                  # a dummy row no slot reads
        ids.append(pad)
        positions.append(0)
        counts.append(1)
        live.append(None)
    keep = last + [last[-1]] * (rows_at_least - len(last))   # the output projection runs on as many rows
    input_ids = torch.tensor([ids], dtype=torch.long, device=engine.device)           # (1, N)
    position_ids = torch.tensor([positions], dtype=torch.long, device=engine.device)  # (1, N)
    step = _StepCache(live, counts)
    with _slot_step(engine):
        out = engine.model(input_ids=input_ids, position_ids=position_ids, cache=step, use_cache=True,
                           attention_mask=_mask_marker(engine, 1),
                           logits_to_keep=torch.tensor(keep, dtype=torch.long, device=engine.device),
                           slot_step=step)
    for slot, n in zip(live, counts, strict=False):
        if slot is not None:
            slot.position += n
    return out.logits[0, :len(slots)].float()   # (len(slots), V)


@dataclass
class _Active:
    request: DecodeRequest
    kv: SlotKV | None                 # None while it waits for another slot to prefill its prompt
    generator: torch.Generator | None
    started: float
    fed: int | None = None            # prompt tokens fed so far, while this slot prefills its prompt
    tokens: list[int] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)   # the calculator's result, fed before picking again
    tool_tokens: int = 0
    kept: list[torch.Tensor] = field(default_factory=list)
    joules: float = 0.0


#: Runs a callable and returns (its result, joules it took): an energy meter around each step.
StepMeter = Callable[[Callable[[], torch.Tensor]], tuple[torch.Tensor, float]]


def decode_alone(engine: Engine, request: DecodeRequest) -> DecodeOutcome:
    """Decode one request in a decoder of one slot (a batch of one: the same step, the same bits, as in a
    pass). What `flywheel graft` and single checks use; there is no other decode loop.

        >>> decode_alone(engine, DecodeRequest(None, None, 32, prompt=Prompt(cache, ids))).tokens  # doctest: +SKIP
    """
    return next(BatchDecoder(engine, slots=1).run([request]))


class BatchDecoder:
    """Continuous batching over a fixed number of slots; see the module docstring for exactness.

    Example:
        >>> out = next(BatchDecoder(engine, slots=4).run([DecodeRequest(cache, logits, 32)]))  # doctest: +SKIP
        >>> out.stop_reason                                                                  # doctest: +SKIP
        'stop'
    """

    def __init__(self, engine: Engine, slots: int = DEFAULT_SLOTS, *, schedule: DecodeSchedule | None = None) -> None:
        if slots < 1:
            raise InputError(f"--slots must be at least 1, got {slots}")
        self.engine = engine
        self.slots = slots
        self.schedule = schedule or DecodeSchedule.of_run(slots, engine.settings.dtype, calculator=False,
                                                          grounding=False, weights=engine.settings.weights)
        if (self.schedule.slots, self.schedule.dtype, self.schedule.weights) != (
                slots, engine.settings.dtype, engine.settings.weights):
            raise ValueError(f"schedule {self.schedule.to_dict()} is not this decoder's "
                             f"({slots} slots, {engine.settings.dtype}, weights {engine.settings.weights})")
        self._eos = engine.eos_ids
        self._has_equals: dict[int, bool] = {}   # token id -> its text contains "=" (the calculator's trigger)
        _install_onednn_linears(engine)
        self.tokens_decoded = 0
        self.model_seconds = 0.0   # in decode steps
        self.pick_seconds = 0.0    # choosing tokens (sampling) between steps
        self.admit_seconds = 0.0   # copying admitted requests' caches into slots
        self.prefill_seconds = 0.0  # of model_seconds, the prompt rows' share of the steps
        self.prefill_tokens = 0     # prompt tokens fed in the steps
        self.grounding_repicks = 0  # tokens the grounding rules refused (each one picked again)
        self.steps = 0

    def run(self, requests: Iterable[DecodeRequest | _Later], *, progress: Progress | None = None,
            step_meter: StepMeter | None = None, heartbeat: Callable[[str], None] | None = None
            ) -> Iterator[DecodeOutcome]:
        """Decode every request; yields each outcome as soon as its request finishes.

        `requests` is read lazily, one request per free slot, so a caller may prepare at admission
        and may react to earlier outcomes (e.g. skip a problem already solved) before the next one.
        A request with a `Prompt` prefills it in the steps first (see `Prompt`).
        `progress(finished, None, "N decode tok/s")` follows each finished request (the total is
        not known: requests are read lazily); `heartbeat("N decode tok/s, T tokens decoded")` is
        called every `PROGRESS_EVERY_S` seconds in which none finished. Neither changes a bit.
        """
        pending = iter(requests)
        exhausted = False
        active: list[_Active | None] = [None] * self.slots
        logits: torch.Tensor | None = None   # (rows, vocab): each occupied slot's next-token logits
        finished = 0
        started = said = time.perf_counter()
        while True:
            if heartbeat and time.perf_counter() - said >= PROGRESS_EVERY_S:
                said = time.perf_counter()
                heartbeat(f"{self.tokens_decoded / max(said - started, 1e-9):.0f} decode tok/s, "
                          f"{self.tokens_decoded:,} tokens decoded")
            for i in range(self.slots):          # continuous batching: fill every free slot
                while active[i] is None and not exhausted:
                    req = next(pending, None)
                    if req is None:
                        exhausted = True
                        break
                    if isinstance(req, _Later):
                        break
                    self._check_in_schedule(req)
                    if req.budget <= 0:          # nothing to decode: finished at admission
                        finished += 1
                        yield DecodeOutcome(req.tag, [], "budget", i, 0.0)
                        continue
                    t0 = time.perf_counter()
                    active[i], first = self._admit(req)
                    if first is not None:
                        logits = self._set_row(logits, i, first)
                    self.admit_seconds += time.perf_counter() - t0
            if all(a is None for a in active):
                if exhausted:
                    return
                time.sleep(LATER_POLL_S)   # the source said LATER with nothing decoding: ask it again shortly
                continue
            ready = [a if a is not None and a.kv is not None and a.fed is None else None for a in active]
            chosen = self._pick(ready, logits) if logits is not None and any(ready) else [0] * self.slots
            feeds: list[list[int]] = [[] for _ in range(self.slots)]
            for i, a in enumerate(active):
                if a is None:
                    continue
                if a.fed is not None:                # prefilling its prompt: the next chunk
                    assert a.request.prompt is not None
                    feeds[i] = a.request.prompt.ids[a.fed:a.fed + PREFILL_CHUNK]
                    continue
                if a.kv is None:                     # waiting for its prompt's prefill
                    continue
                token = chosen[i]
                a.tokens.append(token)
                self.tokens_decoded += 1
                reason = self._stop_reason(a, token)
                if reason is not None:
                    active[i] = None
                    finished += 1
                    said = time.perf_counter()
                    if progress:
                        progress(finished, None, f"{self.tokens_decoded / max(said - started, 1e-9):.0f} decode tok/s")
                    yield DecodeOutcome(a.request.tag, a.tokens, reason, i, time.perf_counter() - a.started,
                                        a.joules, a.kept, a.tool_tokens)
                    continue
                if a.request.calculator and not a.queued:
                    self._calculate(a, token)
                feeds[i] = [token]
            if any(feeds):
                logits = self._step(active, feeds, step_meter)
            elif any(a is not None for a in active):   # all wait on a prompt no slot feeds: a bug, not a hang
                raise AssertionError("decode slots wait on a prompt that no slot is prefilling")

    def _step(self, active: list[_Active | None], feeds: list[list[int]],
              step_meter: StepMeter | None) -> torch.Tensor:
        """One step over the slots' feeds; then the prompts it finished start their waiting forks."""
        t0 = time.perf_counter()
        kvs = [a.kv if a is not None and feeds[i] else None for i, a in enumerate(active)]
        if step_meter is None:
            logits, joules = decode_step(self.engine, kvs, feeds), 0.0
        else:
            def step(kvs: list[SlotKV | None] = kvs) -> torch.Tensor:
                return decode_step(self.engine, kvs, feeds)
            logits, joules = step_meter(step)
        wall = time.perf_counter() - t0
        self.model_seconds += wall
        self.steps += 1
        rows = sum(len(f) for f in feeds)
        for i, a in enumerate(active):   # wall and energy shared by the rows each slot fed
            if a is None or not feeds[i]:
                continue
            share = len(feeds[i]) / rows
            if a.fed is None:
                a.joules += joules * share
                continue
            prompt = a.request.prompt
            assert prompt is not None and a.kv is not None
            prompt.seconds += wall * share
            prompt.joules += joules * share
            self.prefill_seconds += wall * share
            self.prefill_tokens += len(feeds[i])
            a.fed += len(feeds[i])
            if a.fed == len(prompt.ids):     # prefilled: this slot and its waiting forks decode from here
                a.fed = None
                with torch.inference_mode():
                    prompt.logits = logits[i].clone()
                prompt._state = a.kv.frozen()
                for j, w in enumerate(active):
                    if w is not None and w.kv is None and w.request.prompt is prompt:
                        w.kv = self._fork(prompt, w.request)
                        logits = self._set_row(logits, j, prompt.logits)
        return logits

    def _admit(self, req: DecodeRequest) -> tuple[_Active, torch.Tensor | None]:
        """The slot state of `req`, and its first logits row if it has one now."""
        generator = torch.Generator().manual_seed(req.seed) if req.temperature > 0 and req.seed is not None else None
        prompt = req.prompt
        if prompt is None:
            if req.cache is None or req.logits is None:
                raise InputError("a decode request needs a prefilled cache and its logits, or a prompt")
            return _Active(req, SlotKV(req.cache, extra=req.budget), generator, time.perf_counter()), req.logits
        if not prompt.ids:
            raise InputError("a decode request's prompt has no tokens")
        if prompt.done:
            assert prompt.logits is not None
            return _Active(req, self._fork(prompt, req), generator, time.perf_counter()), prompt.logits
        if prompt._state is None:        # the first of its forks: it feeds the prompt
            model = self.engine.model
            kv = SlotKV(prompt.cache, extra=len(prompt.ids) + req.budget, config=model.config, dtype=model.dtype)
            prompt._state = kv
            return _Active(req, kv, generator, time.perf_counter(), fed=0), None
        return _Active(req, None, generator, time.perf_counter()), None   # waits for the feeding fork

    @staticmethod
    def _fork(prompt: Prompt, req: DecodeRequest) -> SlotKV:
        assert prompt._state is not None
        return SlotKV.fork(prompt._state, extra=req.budget)

    def _set_row(self, logits: torch.Tensor | None, i: int, row: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():   # the last step's logits are an inference tensor
            if logits is None:
                logits = torch.zeros(max(self.slots, MIN_ROWS), row.shape[-1])
            logits[i].copy_(row)       # the row a free slot had in the last step is unused
        return logits

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

    def _check_in_schedule(self, req: DecodeRequest) -> None:
        """A request may use a tool only if the schedule names it: the schedule is what gets recorded."""
        if req.calculator and self.schedule.calculator is None:
            raise ValueError("a request hands arithmetic to the calculator, but this decoder's schedule has none "
                             "(build it with DecodeSchedule.of_run(..., calculator=True))")
        if req.grounding is not None and self.schedule.grounding is None:
            raise ValueError("a request is grounded, but this decoder's schedule has no grounding "
                             "(build it with DecodeSchedule.of_run(..., grounding=True))")

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
        assert self.schedule.calculator is not None   # `_check_in_schedule` refuses a calculator request otherwise
        result = calculator.complete(self.engine.decode_text(a.tokens[-CALCULATOR_TAIL:]), self.schedule.calculator)
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
