"""Graft exactness, what `flywheel verify-graft` measures: a graft reproduces fresh computation byte for byte.

Two schedules are checked: the single-sequence one (`run`: the continuation fed in one forward
pass on top of the cache) and the batched decode schedule (`run_slots`: the continuation fed one
token per step through `flywheel.decode`'s slots, beside other samples as neighbours; and, as a
pass feeds a question after its graft, the continuation prefilled as a prompt in the steps).

Per sample: prefill a prefix in the engine's schedule, seal it into an artifact file on disk,
continue the live cache with the continuation tokens (fresh), then read the file back, check
it, graft it into a brand-new cache and continue again (graft). Both logits are hashed. Two
controls show why exactness is defined the way it is: a shifted graft (`--offset K`, RoPE
re-rotation) and one-pass prefill of prefix + continuation against the chunked schedule.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from flywheel.engine import Engine, StopRule
from flywheel.kv import capture, graft, logits_sha256, read_artifact

CONTINUATION_TOKENS = 8
#: Tokens decoded after the continuation is prefilled as a step prompt (`run_slots`).
PROMPT_DECODE = 4


@dataclass
class Sample:
    index: int
    prefix_tokens: int
    fresh_sha256: str
    graft_sha256: str
    sha_equal: bool
    kl: float                        # max over continuation positions, nats
    argmax_agreement: float
    artifact_sha256: str
    artifact_bytes: int


@dataclass
class Report:
    model: str
    fingerprint: str
    samples: int
    sha_equal: int
    kl_max: float
    argmax_agreement: float
    prefix_tokens: list[int]
    per_sample: list[Sample] = field(default_factory=list)
    offset: int = 0
    offset_kl_max: float | None = None
    offset_argmax_agreement: float | None = None
    one_pass_max_abs_diff: float | None = None
    one_pass_sha_equal: bool | None = None
    slots: int | None = None                   # the batched schedule, when checked there
    schedule: dict[str, object] | None = None
    slot_count_invariant: bool | None = None   # sample 1 alone (1 slot) == beside B-1 neighbours
    prompt_sha_equal: int | None = None        # batched: samples equal with the continuation as a step prompt
    weights: str = "fp32"                      # which weights ran the linears (`EngineSettings.weights`)

    @property
    def ok(self) -> bool:
        return (self.samples > 0 and self.sha_equal == self.samples
                and self.prompt_sha_equal in (None, self.samples))

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def corpus_ids(engine: Engine, need: int) -> list[int]:
    """At least `need` tokens of real text (CHAMP problems and solutions), deterministic order."""
    from flywheel.problemsets import champ_corpus

    ids: list[int] = []
    for text in champ_corpus():
        ids.extend(engine.encode(text + "\n", bos=False))
        if len(ids) >= need:
            break
    while len(ids) < need:  # the corpus is ~100k tokens; this only runs for absurd lengths
        ids.extend(ids)
    return ids[:need]


def kl_and_agreement(p_logits: torch.Tensor, q_logits: torch.Tensor) -> tuple[float, float]:
    """Max KL(p || q) over positions (nats) and the fraction of positions with equal argmax."""
    logp = torch.log_softmax(p_logits.double(), dim=-1)
    logq = torch.log_softmax(q_logits.double(), dim=-1)
    kl = (logp.exp() * (logp - logq)).sum(-1)                 # (positions,)
    agree = (p_logits.argmax(-1) == q_logits.argmax(-1)).double().mean()
    return float(kl.clamp_min(0).max()), float(agree)


def run(engine: Engine, *, samples: int, prefix_tokens: Sequence[int], offset: int = 0,
        workdir: Path | None = None, progress: Callable[[Sample], None] | None = None) -> Report:
    """Measure `samples` grafts cycling through `prefix_tokens` lengths; see module docstring."""
    longest = max(prefix_tokens)
    stride = 97  # samples start at different corpus offsets so no two are the same text
    ids = corpus_ids(engine, longest + CONTINUATION_TOKENS + stride * samples)
    report = Report(model=engine.fingerprint.model, fingerprint=engine.fingerprint.digest, samples=samples,
                    weights=engine.settings.weights,
                    sha_equal=0, kl_max=0.0, argmax_agreement=0.0, prefix_tokens=list(prefix_tokens), offset=offset)
    agreements: list[float] = []
    offset_kls: list[float] = []
    offset_agree: list[float] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for i in range(samples):
            n = prefix_tokens[i % len(prefix_tokens)]
            start = i * stride
            prefix = ids[start:start + n]
            cont = ids[start + n:start + n + CONTINUATION_TOKENS]
            if engine.tokenizer.bos_token_id is not None:
                prefix = [engine.tokenizer.bos_token_id] + prefix[1:]
            cache, last = engine.prefill(prefix)
            artifact = capture(engine, cache, prefix, last)
            path = artifact.write(Path(tmp) / f"{artifact.sha256}.kv")
            del artifact
            fresh = engine.forward(cont, cache, keep=len(cont))      # (C, V)
            del cache
            restored = read_artifact(path)
            grafted = graft(engine, restored)
            again = engine.forward(cont, grafted.cache, keep=len(cont))
            kl, agree = kl_and_agreement(fresh, again)
            sample = Sample(i, n, logits_sha256(fresh), logits_sha256(again),
                            logits_sha256(fresh) == logits_sha256(again), kl, agree,
                            restored.sha256, path.stat().st_size)
            report.per_sample.append(sample)
            report.sha_equal += sample.sha_equal
            report.kl_max = max(report.kl_max, kl)
            agreements.append(agree)
            if offset:
                shifted = graft(engine, restored, offset=offset)
                moved = engine.forward(cont, shifted.cache, keep=len(cont), position_offset=offset)
                okl, oagree = kl_and_agreement(fresh, moved)
                offset_kls.append(okl)
                offset_agree.append(oagree)
            if i == 0:
                _, one_pass = engine.prefill(prefix + cont, chunk=len(prefix) + len(cont), keep=len(cont))
                report.one_pass_max_abs_diff = float((one_pass - fresh).abs().max())
                report.one_pass_sha_equal = logits_sha256(one_pass) == logits_sha256(fresh)
            path.unlink()
            if progress:
                progress(sample)
    report.argmax_agreement = sum(agreements) / len(agreements) if agreements else 0.0
    if offset:
        report.offset_kl_max = max(offset_kls)
        report.offset_argmax_agreement = sum(offset_agree) / len(offset_agree)
    return report


def run_slots(engine: Engine, *, samples: int, prefix_tokens: Sequence[int], slots: int,
              workdir: Path | None = None, progress: Callable[[Sample], None] | None = None) -> Report:
    """Graft vs fresh inside the batched decode schedule of `slots` slots.

    Samples decode in groups of `slots`, each group's samples being each other's neighbours.
    Fresh: prefill each prefix, feed the continuation token by token in slot i. Graft: seal the
    prefix into an artifact file, read it back, graft it and feed the same tokens in another
    slot (the group reversed), so neighbours and slot index differ too. Also checks true batch
    invariance: sample 1 decoded alone (one slot) against its logits beside its neighbours.
    """
    from flywheel import config
    from flywheel.decode import BatchDecoder, DecodeRequest, DecodeSchedule, Prompt

    stride = 97
    ids = corpus_ids(engine, max(prefix_tokens) + CONTINUATION_TOKENS + stride * samples)
    # The schedule a default `flywheel run --slots N` records (the tools choose tokens, which this
    # check feeds itself; they do not change a step's bits).
    decoder = BatchDecoder(engine, slots, schedule=DecodeSchedule.of_run(
        slots, engine.settings.dtype, calculator=config.DEFAULT_CALCULATOR, grounding=config.DEFAULT_GROUNDING,
        weights=engine.settings.weights))
    report = Report(model=engine.fingerprint.model, fingerprint=engine.fingerprint.digest, samples=samples,
                    weights=engine.settings.weights,
                    sha_equal=0, kl_max=0.0, argmax_agreement=0.0, prefix_tokens=list(prefix_tokens),
                    slots=slots, schedule=decoder.schedule.to_dict())
    agreements: list[float] = []

    def texts(i: int) -> tuple[list[int], list[int]]:
        n = prefix_tokens[i % len(prefix_tokens)]
        prefix, cont = ids[i * stride:i * stride + n], ids[i * stride + n:i * stride + n + CONTINUATION_TOKENS]
        if engine.tokenizer.bos_token_id is not None:
            prefix = [engine.tokenizer.bos_token_id] + prefix[1:]
        return prefix, cont

    def request(cache: object, logits: torch.Tensor | None, cont: list[int], tag: int) -> DecodeRequest:
        # feed every continuation token; the logits kept after each are compared (the first kept
        # are the prefill's, not part of the comparison)
        return DecodeRequest(cache, logits, len(cont) + 1, tag=tag, keep_logits=True,  # type: ignore[arg-type]
                             forced=[*cont, cont[-1]])

    def continuation_logits(reqs: list[DecodeRequest], dec: BatchDecoder = decoder) -> dict[int, torch.Tensor]:
        return {o.tag: torch.stack(o.step_logits[1:]) for o in dec.run(reqs)}   # (C, V) per sample

    def as_prompt(cache: object, cont: list[int], tag: int) -> DecodeRequest:
        # the continuation prefilled in the steps, as a pass prefills a question after its graft,
        # then PROMPT_DECODE greedy tokens; every logits row from the prompt's last on is compared
        return DecodeRequest(None, None, PROMPT_DECODE, prompt=Prompt(cache, cont), tag=tag,  # type: ignore[arg-type]
                             keep_logits=True, stop=StopRule(newline=False))

    def prompt_logits(reqs: list[DecodeRequest]) -> dict[int, torch.Tensor]:
        return {o.tag: torch.stack(o.step_logits) for o in decoder.run(reqs)}

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for first in range(0, samples, slots):
            group = list(range(first, min(first + slots, samples)))
            fresh_reqs, graft_reqs, paths = [], [], {}
            fresh_prompts, graft_prompts = [], []
            for i in group:
                prefix, cont = texts(i)
                cache, last = engine.prefill(prefix)
                artifact = capture(engine, cache, prefix, last)
                paths[i] = artifact.write(Path(tmp) / f"{artifact.sha256}.kv")
                fresh_reqs.append(request(cache, last[-1], cont, i))
                fresh_prompts.append(as_prompt(cache, cont, i))
            fresh = continuation_logits(fresh_reqs)
            fresh_prompted = prompt_logits(fresh_prompts)
            for i in reversed(group):
                restored = read_artifact(paths[i])
                graft_reqs.append(request(graft(engine, restored).cache, fresh_reqs[i - first].logits, texts(i)[1], i))
                graft_prompts.append(as_prompt(graft(engine, restored).cache, texts(i)[1], i))
            grafted = continuation_logits(graft_reqs)
            grafted_prompted = prompt_logits(graft_prompts)
            report.prompt_sha_equal = (report.prompt_sha_equal or 0) + sum(
                logits_sha256(fresh_prompted[i]) == logits_sha256(grafted_prompted[i]) for i in group)
            if first == 0:
                alone = continuation_logits([request(graft(engine, read_artifact(paths[0])).cache,
                                                     fresh_reqs[0].logits, texts(0)[1], 0)], BatchDecoder(engine, 1))
                report.slot_count_invariant = logits_sha256(alone[0]) == logits_sha256(fresh[0])
            for i in group:
                kl, agree = kl_and_agreement(fresh[i], grafted[i])
                sample = Sample(i, len(texts(i)[0]), logits_sha256(fresh[i]), logits_sha256(grafted[i]),
                                logits_sha256(fresh[i]) == logits_sha256(grafted[i]), kl, agree,
                                paths[i].stem, paths[i].stat().st_size)
                report.per_sample.append(sample)
                report.sha_equal += sample.sha_equal
                report.kl_max = max(report.kl_max, kl)
                agreements.append(agree)
                paths[i].unlink()
                if progress:
                    progress(sample)
    report.argmax_agreement = sum(agreements) / len(agreements) if agreements else 0.0
    return report
