"""Batched decoding: every slot's logits are its own, whatever shares the batch (flywheel/decode.py)."""

from __future__ import annotations

import hashlib

import pytest
import torch

from flywheel.decode import (
    PREFILL_CHUNK,
    BatchDecoder,
    DecodeOutcome,
    DecodeRequest,
    Prompt,
    onednn_dtype_problem,
)
from flywheel.engine import Engine, StopRule
from flywheel.errors import InputError
from flywheel.kv import capture, graft
from flywheel.testing import TINY_SLIDING_WINDOW

NO_STOP = StopRule(newline=False)
PROMPTS = ["Problem: what is 2+3?\nSolution:", "x" * 40, "Hello there, a longer prompt. " * 3, "abc",
           "Solve for x: 2x + 3 = 7\nSolution:"]


def sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def request(engine: Engine, prompt: str, budget: int, tag: str, **kw: object) -> DecodeRequest:
    cache, logits = engine.prefill(engine.encode(prompt))
    return DecodeRequest(cache, logits[-1], budget, stop=NO_STOP, tag=tag, keep_logits=True, **kw)  # type: ignore[arg-type]


def decode(engine: Engine, slots: int, requests: list[DecodeRequest]) -> dict[str, DecodeOutcome]:
    return {o.tag: o for o in BatchDecoder(engine, slots).run(requests)}


def step_shas(out: DecodeOutcome) -> list[str]:
    return [sha(t) for t in out.step_logits]


@pytest.mark.parametrize("kind", ["gemma", "llama", "qwen"])
def test_slot_logits_do_not_depend_on_neighbours_position_or_finish_times(kind: str, tiny_gemma: Engine,
                                                                          tiny_llama: Engine, tiny_qwen: Engine) -> None:
    engine = {"gemma": tiny_gemma, "llama": tiny_llama, "qwen": tiny_qwen}[kind]
    steps = 3 * TINY_SLIDING_WINDOW  # decode well past the sliding window
    alone = decode(engine, 4, [request(engine, PROMPTS[0], steps, "me")])["me"]
    assert len(alone.step_logits) == steps
    reference = step_shas(alone)
    mixes = [
        [request(engine, PROMPTS[2], 7, "n1"), request(engine, PROMPTS[1], steps + 5, "n2"),
         request(engine, PROMPTS[0], steps, "me"), request(engine, PROMPTS[3], 3, "n3"),
         request(engine, PROMPTS[1], 9, "n4")],
        [request(engine, PROMPTS[4], 2 * steps, "n1", temperature=0.9, seed=3),
         request(engine, PROMPTS[0], steps, "me")],
    ]
    for mix in mixes:
        out = decode(engine, 4, mix)
        assert out["me"].slot != alone.slot or mix is mixes[1]
        assert out["me"].tokens == alone.tokens
        assert step_shas(out["me"]) == reference


def test_slot_bits_are_the_same_for_every_slot_count(tiny_gemma: Engine) -> None:
    """True batch invariance: oneDNN rows do not change with the row count (>= 2 rows always run)."""
    shas = []
    for slots in (1, 2, 3, 8):
        neighbours = [request(tiny_gemma, PROMPTS[1], 11, f"n{i}") for i in range(slots - 1)]
        out = decode(tiny_gemma, slots, [*neighbours, request(tiny_gemma, PROMPTS[4], 40, "me")])["me"]
        shas.append(step_shas(out))
    assert all(s == shas[0] for s in shas)


@pytest.mark.parametrize("kind", ["gemma", "llama", "qwen"])
def test_batched_schedule_differs_from_the_single_sequence_path_and_says_so(kind: str, tiny_gemma: Engine,
                                                                            tiny_llama: Engine, tiny_qwen: Engine) -> None:
    """The one-row MKL path is another schedule: compared, its bits differ (so it is never mixed),
    but it is the same computation (folded query heads are grouped-query attention)."""
    engine = {"gemma": tiny_gemma, "llama": tiny_llama, "qwen": tiny_qwen}[kind]
    out = decode(engine, 4, [request(engine, PROMPTS[0], 12, "me")])["me"]
    cache, logits = engine.prefill(engine.encode(PROMPTS[0]))
    single = [logits[-1]]
    for token in out.tokens[:-1]:
        single.append(engine.decode_one_token(cache, token))
    assert sha(single[0]) == sha(out.step_logits[0])          # the prefill's logits are shared
    assert any(sha(a) != sha(b) for a, b in zip(single[1:], out.step_logits[1:], strict=True))
    assert max(float((a - b).abs().max()) for a, b in zip(single, out.step_logits, strict=True)) < 1e-3


def test_graft_equals_fresh_inside_the_batched_schedule(tiny_gemma: Engine) -> None:
    ids = tiny_gemma.encode(PROMPTS[2] * 2)
    assert len(ids) > TINY_SLIDING_WINDOW
    cache, logits = tiny_gemma.prefill(ids)
    artifact = capture(tiny_gemma, cache, ids, logits[-1])
    forced = tiny_gemma.encode(" and then some more text", bos=False)
    fresh = DecodeRequest(cache, logits[-1], len(forced), tag="fresh", keep_logits=True, forced=forced)
    g = graft(tiny_gemma, artifact)
    grafted = DecodeRequest(g.cache, logits[-1], len(forced), tag="graft", keep_logits=True, forced=forced)
    a = decode(tiny_gemma, 4, [request(tiny_gemma, PROMPTS[3], 5, "x"), fresh])
    b = decode(tiny_gemma, 4, [grafted, request(tiny_gemma, PROMPTS[1], 30, "y")])
    assert a["fresh"].slot != b["graft"].slot
    assert step_shas(a["fresh"]) == step_shas(b["graft"])


def test_continuous_batching_refills_free_slots_and_finishes_everything(tiny_llama: Engine) -> None:
    budgets = [3, 20, 5, 1, 8, 13, 2, 0, 6]
    reqs = [request(tiny_llama, PROMPTS[i % len(PROMPTS)], b, f"r{i}") for i, b in enumerate(budgets)]
    outs = list(BatchDecoder(tiny_llama, 3).run(reqs))
    assert sorted(o.tag for o in outs) == sorted(r.tag for r in reqs)
    for o, b in ((o, budgets[int(o.tag[1:])]) for o in outs):
        assert len(o.tokens) == b and o.stop_reason == "budget"
    # the 20-token request is still running while short ones finish and others take their slots
    order = [o.tag for o in outs]
    assert order.index("r1") > order.index("r4")


def test_a_long_request_is_reported_while_it_decodes_and_reporting_changes_no_bit(
        tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    import flywheel.decode as decode_module

    quiet = decode(tiny_gemma, 2, [request(tiny_gemma, PROMPTS[0], 12, "a"), request(tiny_gemma, PROMPTS[1], 3, "b")])
    monkeypatch.setattr(decode_module, "PROGRESS_EVERY_S", 0.0)      # a rate report at every step
    said: list[tuple[int, int | None, str]] = []
    beats: list[str] = []
    reqs = [request(tiny_gemma, PROMPTS[0], 12, "a"), request(tiny_gemma, PROMPTS[1], 3, "b")]
    told = {o.tag: o for o in BatchDecoder(tiny_gemma, 2).run(reqs, progress=lambda *a: said.append(a),
                                                              heartbeat=beats.append)}
    assert {t: (o.tokens, step_shas(o)) for t, o in told.items()} == {t: (o.tokens, step_shas(o)) for t, o in quiet.items()}
    assert len(beats) >= 12 and all(b.endswith(" tokens decoded") and "decode tok/s" in b for b in beats)
    counts = [int(b.split(", ")[1].split()[0].replace(",", "")) for b in beats]
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] >= 12   # from the start, never going back
    assert [done for done, _, _ in said] == [1, 2]                       # progress: each finish, as before


def test_stop_rules_end_a_slot_and_report_why(tiny_gemma: Engine) -> None:
    eos = next(iter(tiny_gemma.eos_ids))
    logits = torch.full((tiny_gemma.model.config.vocab_size,), -10.0)
    logits[eos] = 10.0
    cache, _ = tiny_gemma.prefill(tiny_gemma.encode("abc"))
    outs = decode(tiny_gemma, 2, [
        DecodeRequest(cache, logits, 10, tag="eos"),
        DecodeRequest(cache, tiny_gemma.prefill(tiny_gemma.encode("abc"))[1][-1], 6, stop=NO_STOP, tag="budget"),
    ])
    assert outs["eos"].stop_reason == "eos" and outs["eos"].tokens == [eos]
    assert outs["budget"].stop_reason == "budget" and len(outs["budget"].tokens) == 6


def test_sampled_slots_are_reproducible_by_seed(tiny_gemma: Engine) -> None:
    def sample(seed: int, neighbour: bool) -> list[int]:
        reqs = [request(tiny_gemma, PROMPTS[0], 25, "me", temperature=1.0, seed=seed)]
        if neighbour:
            reqs.insert(0, request(tiny_gemma, PROMPTS[1], 25, "n", temperature=1.0, seed=seed + 1))
        return decode(tiny_gemma, 4, reqs)["me"].tokens

    assert sample(5, False) == sample(5, True)
    assert sample(5, False) != sample(6, False)


def test_bad_slot_count_is_refused(tiny_gemma: Engine) -> None:
    from flywheel.errors import InputError

    with pytest.raises(InputError, match="at least 1"):
        BatchDecoder(tiny_gemma, 0)


@pytest.mark.real_model
def test_real_model_slot_is_neighbour_invariant_past_the_window(real_engine: Engine) -> None:
    from flywheel.problemsets import champ_corpus

    text = "\n".join(t for _, t in zip(range(6), champ_corpus(), strict=False))
    long_ids = real_engine.encode(text)[:600]                # past Gemma 3's 512-token window
    cache, logits = real_engine.prefill(long_ids)
    me = lambda: DecodeRequest(cache, logits[-1], 10, stop=NO_STOP, tag="me", keep_logits=True)  # noqa: E731
    alone = decode(real_engine, 4, [me()])["me"]
    mixed = decode(real_engine, 4, [request(real_engine, PROMPTS[0], 4, "a"),
                                    request(real_engine, PROMPTS[4], 12, "b", temperature=0.7, seed=1), me()])["me"]
    assert mixed.slot != alone.slot
    assert step_shas(mixed) == step_shas(alone)


def test_bfloat16_is_exact_within_itself_and_refuses_float32_artifacts(tiny_dirs: dict, tiny_gemma: Engine) -> None:
    from flywheel.engine import EngineSettings
    from flywheel.errors import FingerprintMismatchError
    from flywheel.kv import exactness as verify

    bf16 = Engine.load(str(tiny_dirs["gemma3"]), EngineSettings(dtype="bfloat16"), progress=False)
    assert bf16.fingerprint.dtype == "bfloat16" and bf16.fingerprint.digest != tiny_gemma.fingerprint.digest
    ids = tiny_gemma.encode(PROMPTS[2])
    cache, logits = tiny_gemma.prefill(ids)
    with pytest.raises(FingerprintMismatchError, match="dtype"):
        graft(bf16, capture(tiny_gemma, cache, ids, logits[-1]))
    if onednn_dtype_problem(torch.bfloat16):   # an AVX2-only host: refused in one line, never a kernel traceback
        with pytest.raises(InputError, match="not possible on this CPU"):
            decode(bf16, 2, [request(bf16, PROMPTS[0], 3, "me")])
        return
    report = verify.run_slots(bf16, samples=4, prefix_tokens=[10, 3 * TINY_SLIDING_WINDOW], slots=3)
    assert report.sha_equal == 4 and report.slot_count_invariant
    alone = decode(bf16, 4, [request(bf16, PROMPTS[0], 30, "me")])["me"]
    mixed = decode(bf16, 4, [request(bf16, PROMPTS[1], 9, "n"), request(bf16, PROMPTS[0], 30, "me")])["me"]
    assert step_shas(alone) == step_shas(mixed)


def test_verify_graft_in_the_batched_schedule_on_the_tiny_model(tiny_gemma: Engine) -> None:
    from flywheel.kv import exactness as verify

    report = verify.run_slots(tiny_gemma, samples=5, prefix_tokens=[8, 2 * TINY_SLIDING_WINDOW + 3], slots=2)
    assert report.ok and report.sha_equal == 5 and report.kl_max == 0.0 and report.argmax_agreement == 1.0
    assert report.slot_count_invariant and report.schedule and report.schedule["slots"] == 2
    assert report.prompt_sha_equal == 5   # the continuation as a step prompt: graft == fresh too
    report.prompt_sha_equal = 4
    assert not report.ok                  # one prompt sample differing fails the check


@pytest.mark.parametrize("window", [None, 9])
def test_folded_heads_are_grouped_query_attention_with_several_kv_heads(window: int | None) -> None:
    """Query head h attends with key/value head h // groups (transformers' `repeat_kv` order), kv_heads > 1;
    a slot feeding T prompt rows attends causally, within its layer's window (packed rows, one call)."""
    from types import SimpleNamespace

    from flywheel import decode as dec

    torch.manual_seed(0)
    heads, kv_heads, d = 9, 3, 16                     # SmolLM2's grouping: 3 query heads per kv head
    counts = [1, 1, 5]                                # slot 0 decodes, slot 1 is free, slot 2 feeds 5 prompt rows
    query = torch.randn(1, heads, sum(counts), d)
    keys = [40, 0, 40]                                # entries in each slot's buffer after the step
    views = []
    for n, t in zip(keys, counts, strict=True):
        start = 0 if window is None or not n else max(0, n - t + 1 - window)
        views.append((torch.randn(1, kv_heads, n - start, d), torch.randn(1, kv_heads, n - start, d), start)
                     if n else None)
    slots = [SimpleNamespace(layers=[SimpleNamespace(window=window)]) if n else None for n in keys]
    step = SimpleNamespace(visible={0: views}, slots=slots, counts=counts)
    module = SimpleNamespace(layer_idx=0, num_key_value_groups=heads // kv_heads)
    out, _ = dec._slot_attention(module, query, query, query, None, slot_step=step, scaling=d ** -0.5)  # type: ignore[arg-type]
    assert out.shape == (1, 7, heads, d) and not out[0, 1].any()   # a free slot gives zeros
    for i, rows in ((0, slice(0, 1)), (2, slice(2, 7))):
        k, v, start = views[i]                                     # type: ignore[misc]
        t = counts[i]
        q_at = torch.arange(keys[i] - t, keys[i])[:, None]         # buffer index of each query row
        k_at = torch.arange(start, keys[i])[None, :]
        allowed = (k_at <= q_at) & (k_at > q_at - (window or 10 ** 6))
        expected = torch.nn.functional.scaled_dot_product_attention(query[:, :, rows], k, v, attn_mask=allowed,
                                                                    scale=d ** -0.5, enable_gqa=True)  # (1, heads, t, d)
        torch.testing.assert_close(out[0, rows], expected[0].transpose(0, 1), rtol=1e-5, atol=1e-6)


# --- prompts prefilled in the batched step (kernel slots-v3) ----------------------------------------


def prompted(engine: Engine, text: str, budget: int, tag: str, prompt: Prompt | None = None, *,
             cache: object = None, **kw: object) -> DecodeRequest:
    """A request whose prompt the decoder prefills in its steps (on `cache`: a graft, else from nothing)."""
    if prompt is None:
        bos = cache is None
        prompt = Prompt(cache if cache is not None else engine.new_cache(), engine.encode(text, bos=bos))  # type: ignore[arg-type]
    return DecodeRequest(None, None, budget, prompt=prompt, stop=NO_STOP, tag=tag, keep_logits=True, **kw)  # type: ignore[arg-type]


LONG = "A prompt longer than one prefill chunk and the tiny model's sliding window. " * 6


@pytest.mark.parametrize("kind", ["gemma", "llama", "qwen"])
def test_a_prompt_prefilled_in_the_step_is_the_models_computation(kind: str, tiny_gemma: Engine,
                                                                  tiny_llama: Engine, tiny_qwen: Engine) -> None:
    """Chunked, masked, beside others: close to the one-sequence prefill (bits differ: another schedule)."""
    engine = {"gemma": tiny_gemma, "llama": tiny_llama, "qwen": tiny_qwen}[kind]
    ids = engine.encode(LONG)
    assert len(ids) > 2 * PREFILL_CHUNK and len(ids) > TINY_SLIDING_WINDOW
    dec = BatchDecoder(engine, 3)
    out = {o.tag: o for o in dec.run([request(engine, PROMPTS[1], 30, "n"), prompted(engine, LONG, 8, "me")])}
    assert dec.prefill_tokens == len(ids)
    cache, logits = engine.prefill(ids)
    single = [logits[-1]]
    for token in out["me"].tokens[:-1]:
        single.append(engine.decode_one_token(cache, token))
    assert max(float((a - b).abs().max()) for a, b in zip(single, out["me"].step_logits, strict=True)) < 1e-3
    assert [int(s.argmax()) for s in single] == [int(s.argmax()) for s in out["me"].step_logits]


@pytest.mark.parametrize("kind", ["gemma", "llama", "qwen"])
def test_a_prompts_bits_do_not_depend_on_its_neighbours_or_slot(kind: str, tiny_gemma: Engine,
                                                                tiny_llama: Engine, tiny_qwen: Engine) -> None:
    engine = {"gemma": tiny_gemma, "llama": tiny_llama, "qwen": tiny_qwen}[kind]
    alone = decode(engine, 1, [prompted(engine, LONG, 20, "me")])["me"]
    reference = step_shas(alone)
    mixes = [   # neighbours decoding, neighbours prefilling their own prompts in the same steps
        [request(engine, PROMPTS[1], 40, "n1"), prompted(engine, PROMPTS[2], 5, "n2"),
         prompted(engine, LONG, 20, "me"), prompted(engine, PROMPTS[0] * 3, 30, "n3", temperature=0.9, seed=1)],
        [prompted(engine, PROMPTS[4], 3, "n1"), prompted(engine, PROMPTS[3], 2, "n2"), prompted(engine, LONG, 20, "me")],
    ]
    for mix in mixes:
        out = decode(engine, 3, mix)
        assert out["me"].tokens == alone.tokens
        assert step_shas(out["me"]) == reference


def test_forks_share_one_prefill_and_decode_as_if_each_had_its_own(tiny_gemma: Engine) -> None:
    shared = Prompt(tiny_gemma.new_cache(), tiny_gemma.encode(PROMPTS[4]))
    forks = [prompted(tiny_gemma, "", 12, f"f{k}", shared, temperature=1.0, seed=k) for k in range(4)]
    dec = BatchDecoder(tiny_gemma, 3)   # one fork waits for a free slot, after the prefill is done
    together = {o.tag: o for o in dec.run([request(tiny_gemma, PROMPTS[1], 6, "n"), *forks])}
    assert dec.prefill_tokens == len(shared.ids) and shared.done
    for k in range(4):
        own = decode(tiny_gemma, 2, [prompted(tiny_gemma, PROMPTS[4], 12, "me", temperature=1.0, seed=k)])["me"]
        assert together[f"f{k}"].tokens == own.tokens and step_shas(together[f"f{k}"]) == step_shas(own)
    assert len({tuple(together[f"f{k}"].tokens) for k in range(4)}) > 1   # the seeds drew differently


def test_graft_equals_fresh_when_the_question_is_prefilled_in_the_step(tiny_gemma: Engine) -> None:
    ids = tiny_gemma.encode(PROMPTS[2] * 2)
    assert len(ids) > TINY_SLIDING_WINDOW
    cache, logits = tiny_gemma.prefill(ids)
    artifact = capture(tiny_gemma, cache, ids, logits[-1])
    question = "Solve for y: 3y = 12.\nSolution:"
    fresh = decode(tiny_gemma, 4, [request(tiny_gemma, PROMPTS[3], 5, "x"),
                                   prompted(tiny_gemma, question, 10, "fresh", cache=cache)])["fresh"]
    grafted = decode(tiny_gemma, 2, [prompted(tiny_gemma, question, 10, "graft", cache=graft(tiny_gemma, artifact).cache),
                                     prompted(tiny_gemma, LONG, 9, "y")])["graft"]
    assert fresh.tokens == grafted.tokens and step_shas(fresh) == step_shas(grafted)


# --- memory follows use, not the budget (issue 34 item 7) ------------------------------------------


def _watch_slot_bytes(monkeypatch: pytest.MonkeyPatch) -> list[list[object]]:
    """Record every step's occupied slot caches (SlotKV), as the step sees them."""
    from flywheel import decode as dec

    seen: list[list[object]] = []
    step = dec.decode_step

    def watched(engine: Engine, slots: list, feeds: list) -> torch.Tensor:
        seen.append([s for s in slots if s is not None])
        return step(engine, slots, feeds)

    monkeypatch.setattr(dec, "decode_step", watched)
    return seen


def test_a_huge_budget_on_many_slots_allocates_what_the_slots_use(tiny_gemma: Engine,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from flywheel import decode as dec

    seen = _watch_slot_bytes(monkeypatch)
    huge, slots, steps = 10 ** 8, 16, 4 * TINY_SLIDING_WINDOW   # up front: ~50 GB per slot on this tiny model
    reqs = [prompted(tiny_gemma, PROMPTS[i % len(PROMPTS)], huge, f"r{i}", forced=[65] * steps) for i in range(slots)]
    outs = list(BatchDecoder(tiny_gemma, slots).run(reqs))
    assert len(outs) == slots and all(len(o.tokens) == steps for o in outs)
    cfg = tiny_gemma.model.config
    per_entry = 2 * cfg.num_key_value_heads * cfg.head_dim * 4                    # bytes: K and V, float32
    longest = max(len(r.prompt.ids) for r in reqs if r.prompt) + steps             # entries a slot stores at most
    bound = slots * cfg.num_hidden_layers * per_entry * 2 * (longest + dec.KV_GROW)
    assert max(len(step) for step in seen) == slots
    assert max(sum(kv.nbytes for kv in step) for step in seen) <= bound   # type: ignore[attr-defined]


def test_sliding_layers_keep_about_their_window_and_growing_changes_no_bit(tiny_gemma: Engine,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Buffers that grow one entry at a time (and sliding layers that drop what their window left
    behind) give every slot the same bits as buffers that never grow."""
    from flywheel import decode as dec

    def mix() -> dict[str, DecodeOutcome]:
        shared = Prompt(tiny_gemma.new_cache(), tiny_gemma.encode(PROMPTS[4]))
        return decode(tiny_gemma, 3, [
            request(tiny_gemma, PROMPTS[0], 3 * TINY_SLIDING_WINDOW, "plain"),
            prompted(tiny_gemma, LONG, 2 * TINY_SLIDING_WINDOW, "long"),
            *[prompted(tiny_gemma, "", 20, f"f{k}", shared, temperature=1.0, seed=k) for k in range(3)]])

    reference = mix()
    monkeypatch.setattr(dec, "KV_GROW", 1)
    seen = _watch_slot_bytes(monkeypatch)
    grown = mix()
    for tag, out in reference.items():
        assert grown[tag].tokens == out.tokens and step_shas(grown[tag]) == step_shas(out), tag
    capacities = [layer.keys.shape[-2] for step in seen for kv in step for layer in kv.layers  # type: ignore[attr-defined]
                  if layer.window is not None]
    assert max(capacities) <= 2 * TINY_SLIDING_WINDOW + PREFILL_CHUNK


def test_a_plain_forward_on_another_thread_during_a_step_runs_the_plain_model(tiny_gemma: Engine,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: what a step switches (attention implementation, linear path) is switched under the
    engine's lock, taken inside the engine: a forward on another thread mid-step waits, then is plain."""
    import threading

    from flywheel import decode as dec

    ids = tiny_gemma.encode(PROMPTS[2])
    plain = tiny_gemma.forward(ids, tiny_gemma.new_cache())
    me = request(tiny_gemma, PROMPTS[0], 3, "me")
    lock, step_thread = tiny_gemma.lock, threading.get_ident()
    in_step, other_at_lock = threading.Event(), threading.Event()

    class Watched:
        """The engine's lock, saying when another thread asks for it."""

        def __enter__(self) -> None:
            if threading.get_ident() != step_thread:
                other_at_lock.set()
            lock.acquire()

        def __exit__(self, *exc: object) -> None:
            lock.release()

    def mid_step(module: torch.nn.Module, args: object) -> None:   # the step's thread, inside the model call
        if getattr(dec._in_step, "active", False) and not in_step.is_set():
            in_step.set()
            assert other_at_lock.wait(timeout=60), "the other thread's forward never asked for the engine's lock"

    got: dict[str, torch.Tensor] = {}

    def other() -> None:
        assert in_step.wait(timeout=60)
        got["logits"] = tiny_gemma.forward(ids, tiny_gemma.new_cache())

    monkeypatch.setattr(tiny_gemma.model, "_flywheel_lock", Watched())
    hook = tiny_gemma.model.model.layers[0].register_forward_pre_hook(mid_step)
    thread = threading.Thread(target=other)
    try:
        thread.start()
        out = decode(tiny_gemma, 2, [me])["me"]
        thread.join(timeout=60)
    finally:
        hook.remove()
    assert in_step.is_set() and len(out.tokens) == 3
    assert not thread.is_alive() and sha(got["logits"]) == sha(plain)
    assert tiny_gemma.model.config._attn_implementation == "sdpa"


def test_a_request_outside_the_decoders_schedule_is_refused_and_the_builder_is_the_runs(tiny_gemma: Engine) -> None:
    """The schedule a pass records is the one its decoder runs: a tool it does not name is refused."""
    from flows.run import RunConfig
    from flywheel.decode import DecodeSchedule

    cache, logits = tiny_gemma.prefill(tiny_gemma.encode("Q: 2 + 3 ="))
    for tool in ({"calculator": True}, {"grounding": frozenset({"2"})}):
        req = DecodeRequest(cache, logits[-1], 4, tag="me", **tool)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="schedule"):
            next(iter(BatchDecoder(tiny_gemma, 2).run([req])))
    both = DecodeSchedule.of_run(2, tiny_gemma.settings.dtype, calculator=True, grounding=True)
    assert both.calculator and both.grounding
    assert BatchDecoder(tiny_gemma, 2, schedule=both).schedule is both
    cfg = RunConfig(problems="gen:linear?n=1", slots=2, calculator=True)
    assert cfg.schedule() == DecodeSchedule.of_run(2, cfg.dtype, calculator=True, grounding=False)
    with pytest.raises(ValueError, match="not this decoder's"):
        BatchDecoder(tiny_gemma, 3, schedule=both)
