"""`flywheel deposit` and `flywheel library ...`: what curators use to fill and keep the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from flywheel.cli.common import echo_json, settings_of
from flywheel.errors import FlywheelError, InputError


def _open(ctx: click.Context):  # type: ignore[no-untyped-def]
    from flywheel.library import Library

    s = settings_of(ctx)
    return Library.open(s.library, s.db_url)


def _engine(ctx: click.Context):  # type: ignore[no-untyped-def]
    from flywheel.engine import Engine

    return Engine.load(settings_of(ctx).model)


@click.command("deposit")
@click.option("--problem", help="Problem statement.")
@click.option("--solution", help="Worked solution text.")
@click.option("--answer", help="Final answer (checked by the verifier before anything is stored).")
@click.option("--reference", help="Reference answer to verify against (else: by substitution).")
@click.option("--id", "problem_id", help="Problem id (default: derived from the normalized text).")
@click.option("--file", "file", type=click.Path(path_type=Path), help="Batch: .jsonl, .csv or .parquet with id, problem, solution, answer, reference.")
@click.option("--unverified", is_flag=True, help="Deposit even if the answer cannot be verified; marked as such, never routed unless asked.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def deposit(ctx: click.Context, problem: str | None, solution: str | None, answer: str | None, reference: str | None,
            problem_id: str | None, file: Path | None, unverified: bool, as_json: bool) -> None:
    """Verify a solution's answer, prefill it as a graft, and add it to the library.

    Deposits are idempotent: the same problem, solution and model give the same artifact. In a
    batch, bad rows are reported by line number and the good ones are deposited; the exit
    status is 1 if any row was refused.

    \b
    Examples:
      flywheel deposit --problem 'What is 2+3?' --solution '2+3=5' --answer 5 --reference 5
      flywheel deposit --file curated.jsonl
    """
    from flywheel.problemsets import Problem

    if file is not None and any(v is not None for v in (problem, solution, answer, reference, problem_id)):
        raise click.UsageError("give either --file or --problem/--solution/--answer, not both")
    if file is None:
        missing = [n for n, v in (("--problem", problem), ("--solution", solution), ("--answer", answer)) if not v]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)} (or use --file)")
        rows: list[Any] = [  # (line, row) pairs, or BadRow
            (0, {"id": problem_id or "", "problem": problem, "solution": solution, "answer": answer,
                 "reference": reference or ""})]
    else:
        from flywheel.tables import read_table

        rows = list(read_table(file, required=("problem", "solution", "answer")))
    user = "curator"
    engine = _engine(ctx)
    results: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    with _open(ctx) as lib, click.progressbar(rows, label="depositing", file=click.get_text_stream("stderr"),  # type: ignore[operator]  # click 8.5 stub
                                              show_pos=True) as bar:
        for item in bar:
            from flywheel.tables import BadRow

            if isinstance(item, BadRow):
                refused.append({"line": item.line, "reason": item.reason})
                continue
            line, row = item  # type: ignore[misc]
            p = Problem(id=row.get("id", "").strip(), text=row["problem"], reference=row.get("reference") or None,
                        source=str(file.name) if file else "curator")
            try:
                r = lib.deposit(engine, p, row["solution"], row["answer"], deposited_by=f"{user}:cli",
                                unverified=unverified)
            except FlywheelError as err:
                refused.append({"line": line, "reason": err.message})
                continue
            results.append({"line": line, "problem_id": r.problem_id, "artifact": r.artifact_sha256,
                            "created": r.created, "tokens": r.token_count, "verdict": r.verdict_status,
                            "unverified": r.unverified})
    if as_json:
        echo_json({"deposited": results, "refused": refused})
    else:
        for r in results:
            state = "new" if r["created"] else "already present"
            click.echo(f"deposited {r['problem_id']}: artifact {str(r['artifact'])[:16]} ({r['tokens']} tokens, {state}"
                       f"{', UNVERIFIED' if r['unverified'] else ''})")
        if file is not None:
            for bad in refused:
                click.echo(f"refused line {bad['line']}: {bad['reason']}", err=True)
            click.echo(f"{len(results)} deposited, {len(refused)} refused")
    if refused and file is None:
        raise FlywheelError(refused[0]["reason"])  # a single deposit: its refusal is the error
    ctx.exit(1 if refused else 0)


@click.group("library")
def library() -> None:
    """Inspect, check, move and rebuild the verified-solution library.

    \b
    Examples:
      flywheel library ls
      flywheel library verify
      flywheel library export bundle.tar && flywheel --library other/ library import bundle.tar
    """


@library.command("ls")
@click.option("--all", "show_all", is_flag=True, help="Include unverified deposits.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def ls(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """List artifacts: id, problem, tokens, size, model.

    \b
    Example:
      flywheel library ls --json
    """
    with _open(ctx) as lib:
        rows = [{"artifact": a.sha256, "problem_id": a.problem_id, "tokens": a.token_count, "bytes": a.size_bytes,
                 "model": a.model_name, "fingerprint": a.fingerprint_digest, "created_at": a.created_at}
                for a in lib.catalog.list_artifacts(include_unverified=show_all)]
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        click.echo(f"{r['artifact'][:16]}  {r['problem_id']:<28} {r['tokens']:>6} tok {r['bytes'] / 1e6:>8.2f} MB  "
                   f"{r['model']}  fp {r['fingerprint'][:12]}")
    click.echo(f"{len(rows)} artifacts, {sum(int(r['tokens']) for r in rows):,} stored tokens")


@library.command("show")
@click.argument("artifact_id")
@click.pass_context
def show(ctx: click.Context, artifact_id: str) -> None:
    """Show one artifact: its catalog row, problem, solution and checked header.

    \b
    Example:
      flywheel library show c7bcf81b
    """
    from flywheel.kv import parse_artifact

    with _open(ctx) as lib:
        row = lib.catalog.get_artifact(artifact_id)
        sol = lib.catalog.get_solution(row.solution_id)
        prob = lib.catalog.get_problem(row.problem_id)
        data = lib.store.get(row.sha256)
    header = parse_artifact(data).header if data is not None else None
    out = {"artifact": row.sha256, "problem_id": row.problem_id, "problem": prob.text if prob else None,
           "solution": sol.text if sol else None, "answer": sol.answer if sol else None,
           "verdict": sol.verdict_status if sol else None, "unverified": sol.unverified if sol else None,
           "deposited_by": sol.deposited_by if sol else None, "tokens": row.token_count, "bytes": row.size_bytes,
           "fingerprint": json.loads(row.fingerprint_json), "file": "missing" if data is None else "ok (hash checked)",
           "layers": [layer.kind for layer in header.layers] if header else None,
           "logits_sha256": row.logits_sha256}
    click.echo(json.dumps(out, indent=2, default=str))


@library.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def verify(ctx: click.Context, as_json: bool) -> None:
    """Re-hash every artifact; exit 1 naming each missing, corrupt or uncatalogued one.

    \b
    Example:
      flywheel library verify
    """
    from flywheel.errors import ArtifactError

    bad: list[dict[str, str]] = []
    with _open(ctx) as lib:
        rows = lib.catalog.list_artifacts(include_unverified=True)
        with click.progressbar(rows, label="verifying", file=click.get_text_stream("stderr")) as bar:  # type: ignore[operator]  # click 8.5 stub
            for a in bar:
                try:
                    if lib.store.get(a.sha256) is None:
                        bad.append({"artifact": a.sha256, "problem": a.problem_id, "reason": "file missing"})
                except ArtifactError as err:
                    bad.append({"artifact": a.sha256, "problem": a.problem_id, "reason": err.message})
        for sha in lib.catalog.orphans(lib.store.iter_ids()):
            bad.append({"artifact": sha, "problem": "", "reason": "file has no catalog row (interrupted deposit?)"})
    if as_json:
        echo_json({"checked": len(rows), "bad": bad})
    else:
        for b in bad:
            click.echo(f"BAD {b['artifact'][:16]} {b['problem']}: {b['reason']}")
        click.echo(f"{len(rows)} artifacts checked, {len(bad)} bad")
    ctx.exit(1 if bad else 0)


@library.command("export")
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def export(ctx: click.Context, bundle: Path) -> None:
    """Write a bundle (a tar of artifacts plus a manifest of hashes, fingerprints and solutions).

    \b
    Example:
      flywheel library export library-bundle.tar
    """
    from flywheel.bundle import export_bundle

    with _open(ctx) as lib:
        n = export_bundle(lib, bundle)
    click.echo(f"exported {n} artifacts to {bundle}")


@library.command("import")
@click.argument("bundle", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--any-fingerprint", is_flag=True, help="Also import artifacts made on another setup (never grafted here).")
@click.pass_context
def import_(ctx: click.Context, bundle: Path, any_fingerprint: bool) -> None:
    """Import a bundle: every file hash- and fingerprint-checked; unknown or escaping paths refused.

    \b
    Example:
      flywheel --library other/ library import library-bundle.tar
    """
    from flywheel.bundle import import_bundle

    engine = _engine(ctx)
    with _open(ctx) as lib:
        report = import_bundle(lib, bundle, engine.fingerprint.digest, any_fingerprint=any_fingerprint)
    for sha, reason in report.refused:
        click.echo(f"refused {sha[:16]}: {reason}", err=True)
    click.echo(f"imported {report.imported}, already present {report.present}, refused {len(report.refused)}")
    ctx.exit(1 if report.refused else 0)


@library.command("rebuild")
@click.pass_context
def rebuild(ctx: click.Context) -> None:
    """Re-prefill every stored solution for the current model (old artifacts are never grafted by it).

    \b
    Example:
      flywheel --model smollm2-135m library rebuild
    """
    from flywheel.problemsets import Problem

    engine = _engine(ctx)
    done = 0
    with _open(ctx) as lib:
        rows = lib.catalog.list_artifacts(include_unverified=True)
        seen: set[int] = set()
        with click.progressbar(rows, label="rebuilding", file=click.get_text_stream("stderr")) as bar:  # type: ignore[operator]  # click 8.5 stub
            for a in bar:
                if a.solution_id in seen:
                    continue
                seen.add(a.solution_id)
                sol, prob = lib.catalog.get_solution(a.solution_id), lib.catalog.get_problem(a.problem_id)
                if sol is None or prob is None:
                    continue
                p = Problem(id=prob.id, text=prob.text, reference=prob.reference, source=prob.source or "")
                lib.deposit(engine, p, sol.text, sol.answer, deposited_by=sol.deposited_by, unverified=sol.unverified)
                done += 1
        lib.router.rebuild(lib.catalog, engine.fingerprint.digest)
    if not done:
        raise InputError("the library holds no solutions to rebuild")
    click.echo(f"rebuilt {done} solutions for {engine.fingerprint.model} (fingerprint {engine.fingerprint.digest[:12]})")
