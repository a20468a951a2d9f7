"""`flywheel verify-graft` and `flywheel prepare-model`: the engine-level commands."""

from __future__ import annotations

import json

import click

from flywheel import config
from flywheel.cli.common import echo_json, settings_of
from flywheel.errors import InputError

DEFAULT_SAMPLES = 50
#: Lengths cycled through by the samples: below, at and well past Gemma 3's 512-token window.
DEFAULT_PREFIX_TOKENS = (35, 256, 640, 1200)


@click.command("verify-graft")
@click.option("--samples", default=DEFAULT_SAMPLES, show_default=True, type=click.IntRange(1, 10_000),
              help="Number of prefix/continuation samples.")
@click.option("--prefix-tokens", "prefix_tokens", multiple=True, type=click.IntRange(2, 1_000_000),
              help=f"Prefix length(s), cycled through by the samples (default {' '.join(map(str, DEFAULT_PREFIX_TOKENS))}). "
                   "Accepts repeats or a space-separated list.")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0, 1_000_000),
              help="Also graft shifted by K positions (RoPE re-rotation) and report its KL.")
@click.option("--device", default="cpu", show_default=True, type=click.Choice(["cpu", "cuda"]),
              help="cpu or cuda (deterministic settings either way).")
@click.option("--slots", type=click.IntRange(1, 256), default=None,
              help="Check inside the batched decode schedule of B slots (samples are each other's neighbours).")
@click.option("--dtype", type=click.Choice(config.RUN_DTYPES), default=config.DEFAULT_DTYPE, show_default=True,
              help="Engine dtype (part of the fingerprint; bfloat16 is opt-in).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.argument("more_prefix_tokens", nargs=-1, type=click.IntRange(2, 1_000_000))
@click.pass_context
def verify_graft(ctx: click.Context, samples: int, prefix_tokens: tuple[int, ...], offset: int, device: str,
                 slots: int | None, dtype: str, as_json: bool, more_prefix_tokens: tuple[int, ...]) -> None:
    """Check that grafted logits are SHA-256-equal to fresh computation.

    Exit status 0 only when every sample is SHA-equal.

    \b
    Examples:
      flywheel verify-graft --samples 8 --prefix-tokens 64 1200 2048 --offset 3 --json
      flywheel verify-graft --slots 8 --samples 50 --prefix-tokens 35 600
    """
    from flywheel.engine import Engine, EngineSettings
    from flywheel.kv import exactness as vg

    lengths = list(prefix_tokens) + list(more_prefix_tokens) or list(DEFAULT_PREFIX_TOKENS)
    settings = settings_of(ctx)
    if slots is not None and offset:
        raise click.UsageError("--offset is measured in the single-sequence schedule; drop it with --slots")
    engine = Engine.load(settings.model, EngineSettings(device=device, dtype=dtype))  # type: ignore[arg-type]
    window = engine.context_window
    if window and max(lengths) + vg.CONTINUATION_TOKENS > window:
        raise click.UsageError(f"--prefix-tokens {max(lengths):,} plus the {vg.CONTINUATION_TOKENS}-token continuation "
                               f"is longer than {engine.fingerprint.model}'s {window:,}-token window")

    def show(sample: vg.Sample) -> None:
        if not as_json:
            mark = "equal" if sample.sha_equal else "DIFFERENT"
            click.echo(f"  sample {sample.index + 1:>3}/{samples}  prefix {sample.prefix_tokens:>5} tok  "
                       f"fresh {sample.fresh_sha256[:16]}  graft {sample.graft_sha256[:16]}  {mark}  "
                       f"kl {sample.kl:.3g}", err=False)

    if not as_json:
        click.echo(f"verify-graft: {engine.fingerprint.model} on {engine.fingerprint.device_name}, weights "
                   f"{engine.settings.weights} (fingerprint {engine.fingerprint.digest[:16]})")
    if slots is None:
        report = vg.run(engine, samples=samples, prefix_tokens=lengths, offset=offset, workdir=None, progress=show)
    else:
        report = vg.run_slots(engine, samples=samples, prefix_tokens=lengths, slots=slots, progress=show)
    if as_json:
        payload = report.to_json()
        payload["per_sample"] = [dict(s) for s in payload["per_sample"]]  # type: ignore[call-overload,attr-defined]
        echo_json(payload)
    else:
        click.echo(f"{report.sha_equal}/{report.samples} SHA-equal, max KL {report.kl_max:.3g}, "
                   f"argmax agreement {report.argmax_agreement:.1%}")
        if report.one_pass_max_abs_diff is not None:
            click.echo(f"one-pass prefill vs the chunked schedule: max |Δlogit| {report.one_pass_max_abs_diff:.3g} "
                       f"({'equal' if report.one_pass_sha_equal else 'not byte-equal'}) — exactness is per schedule")
        if report.slots is not None:
            sched = report.schedule or {}
            tools = ", ".join(f"{name} {sched.get(name) or 'off'}" for name in ("calculator", "grounding"))
            click.echo(f"batched schedule: {report.slots} slots, kernel {sched.get('kernel', '?')}, "
                       f"{sched.get('dtype', '?')}, sampler {sched.get('sampler', '?')}, {tools} (what "
                       f"`flywheel run --slots {report.slots}` records with its default tools); "
                       f"sample 1 alone vs beside its neighbours: "
                       f"{'SHA-equal' if report.slot_count_invariant else 'DIFFERENT'} (batch invariance)")
            click.echo(f"the continuation prefilled as a prompt in the steps (a pass's question after its graft): "
                       f"{report.prompt_sha_equal}/{report.samples} SHA-equal")
        if offset:
            click.echo(f"graft shifted by {offset} positions (RoPE re-rotation): max KL {report.offset_kl_max:.3g}, "
                       f"argmax agreement {report.offset_argmax_agreement:.1%} — own position is the exact point")
    ctx.exit(0 if report.ok else 1)


@click.command("prepare-model")
@click.option("--json", "as_json", is_flag=True, help="Print the fingerprint as JSON.")
@click.pass_context
def prepare_model(ctx: click.Context, as_json: bool) -> None:
    """Prepare (once) and load the model, then print its fingerprint.

    \b
    Example:
      flywheel --model smollm2-135m prepare-model --json
    """
    from flywheel.engine import Engine

    engine = Engine.load(settings_of(ctx).model)
    fp = engine.fingerprint
    if as_json:
        click.echo(json.dumps({**fp.to_dict(), "digest": fp.digest}, indent=2))
    else:
        click.echo(f"{fp.model}: fingerprint {fp.digest}\n  weights {fp.weights_sha256}\n  tokenizer {fp.tokenizer_sha256}"
                   f"\n  {fp.dtype}, {fp.attn_implementation}, {fp.device_name}, {fp.threads} threads"
                   f"\n  weights {engine.settings.weights}" + (f" ({fp.extra['kernel']} on {fp.extra['isa']})" if fp.extra.get("kernel") else ""))


@click.command("graft")
@click.argument("artifact")
@click.option("--prompt", "prompt", default="", help="Text fed after the grafted state (e.g. a new problem).")
@click.option("--max-new", default=32, show_default=True, type=click.IntRange(0, 100_000),
              help="Decode up to this many tokens (greedy; stops at EOS or a newline).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def graft_command(ctx: click.Context, artifact: str, prompt: str, max_new: int, as_json: bool) -> None:
    """Graft an artifact (a file, or an id in the library) and continue decoding from it.

    The artifact is hash-checked and fingerprint-checked first; a refusal exits with status 3
    and says why.

    \b
    Example:
      flywheel graft library/artifacts/c7/c7bcf81b....kv --prompt ' What is 2+3?\\nAnswer:'
    """
    from pathlib import Path

    from flywheel.decode import DecodeRequest, Prompt, decode_alone
    from flywheel.engine import Engine, StopRule
    from flywheel.kv import graft, read_artifact

    settings = settings_of(ctx)
    engine = Engine.load(settings.model)
    path = Path(artifact)
    if path.is_file():
        grafted = graft(engine, read_artifact(path))
    else:
        from flywheel.domain import ShaPrefix
        from flywheel.library import Library

        with Library.open(settings.library, settings.db_url) as lib:
            row = lib.catalog.get_artifact(ShaPrefix(artifact))
            grafted = lib.load_graft(engine, row.sha256)
    text, produced = "", 0
    if max_new:
        ids = engine.encode(prompt, bos=False) if prompt else []
        if not ids:
            raise click.UsageError("--prompt is needed to decode after a graft (the artifact's last logits are not stored)")
        window = engine.context_window
        room = window - grafted.token_count - len(ids) if window else max_new
        if max_new > room:
            raise InputError(f"--max-new {max_new:,} would decode past the model's {window:,}-token window "
                             f"({grafted.token_count:,} restored + {len(ids):,} prompt tokens leave {max(room, 0):,})",
                             hint=f"give --max-new {max(room, 0):,} or less")
        # The run's own decoder, one slot: the prompt is prefilled and decoded as a pass would.
        request = DecodeRequest(None, None, max_new, stop=StopRule(), prompt=Prompt(grafted.cache, ids))
        tokens = decode_alone(engine, request).tokens
        text, produced = engine.decode_text(tokens), len(tokens)
    if as_json:
        echo_json({"artifact": grafted.artifact_sha256, "restored_tokens": grafted.token_count,
                   "decode_tokens": produced, "text": text})
    else:
        click.echo(f"grafted {grafted.artifact_sha256[:16]} ({grafted.token_count} tokens restored)")
        if max_new:
            click.echo(f"{produced} decode tokens: {text!r}")
