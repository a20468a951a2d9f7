"""`flywheel deposit` and `flywheel library ...`: what curators use to fill and keep the library."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from flywheel.cli.common import echo_json, progress_display, settings_of
from flywheel.errors import FlywheelError, InputError, LibraryError
from flywheel.terminal import printable


def _open(ctx: click.Context, *, write: bool = True):  # type: ignore[no-untyped-def]
    """The library of the global options; `write=False` falls back to read-only (ls, show, verify, export)."""
    from flywheel.config import sqlite_file, validate_library_path
    from flywheel.library import Library

    s = settings_of(ctx)
    if not write:   # inspecting never creates a library, a catalog or a folder
        hint = "check --library (FLYWHEEL_LIBRARY) and --db (FLYWHEEL_DB); inspecting never creates a library"
        catalog = sqlite_file(s.db_url)
        if catalog is not None and not catalog.is_file():
            where = "" if s.db_explicit else f"no library at {printable(str(s.library), 120)}: "
            raise LibraryError(f"{where}no catalog at {printable(str(catalog), 120)}", hint=hint)
        if not s.library.is_dir():
            raise LibraryError(f"no library at {printable(str(s.library), 120)} (no such folder)", hint=hint)
    if not write:  # inspecting: open normally where possible, else read-only (a read-only disk or folder)
        try:
            validate_library_path(s.library, write=True)
        except InputError:
            return Library.open(s.library, s.db_url, read_only=True)
    validate_library_path(s.library, write=True)
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
    from flywheel.tables import BadRow

    if file is not None and any(v is not None for v in (problem, solution, answer, reference, problem_id)):
        raise click.UsageError("give either --file or --problem/--solution/--answer, not both")
    if file is None:
        missing = [n for n, v in (("--problem", problem), ("--solution", solution), ("--answer", answer)) if not v]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)} (or use --file)")
        assert problem and solution and answer  # checked just above; narrows the types
        rows: list[tuple[int, dict[str, str]] | BadRow] = [
            (0, {"id": problem_id or "", "problem": problem, "solution": solution, "answer": answer,
                 "reference": reference or ""})]
    else:
        from flywheel.tables import read_table

        rows = list(read_table(file, required=("problem", "solution", "answer")))  # (line, row) pairs, or BadRow
    from flywheel.config import validate_library_path

    validate_library_path(settings_of(ctx).library, write=True)  # before minutes of model loading
    engine = _engine(ctx)
    with _open(ctx) as lib, progress_display("depositing") as progress:
        batch = lib.deposit_many(engine, rows, source=str(file.name) if file else "curator",
                                 deposited_by="curator:cli", unverified=unverified, progress=progress)
    results = [{"line": d.line, "problem_id": d.result.problem_id, "artifact": d.result.artifact_sha256,
                "created": d.result.created, "tokens": d.result.token_count, "verdict": d.result.verdict_status,
                "unverified": d.result.unverified, "given_id": d.given_id or None,
                "filed_under_existing": d.filed_under_existing} for d in batch.deposited]
    refused = [{"line": r.line, "reason": r.reason} for r in batch.refused]
    if as_json:
        echo_json({"deposited": results, "refused": refused})
    else:
        for r in results:
            state = "new" if r["created"] else "already present"
            same = (f" (given id {printable(r['given_id'], 60)}: the same text is already this problem)"
                    if r["filed_under_existing"] else "")
            click.echo(f"deposited {printable(r['problem_id'], 60)}{same}: artifact {str(r['artifact'])[:16]} "
                       f"({r['tokens']} tokens, {state}{', UNVERIFIED' if r['unverified'] else ''})")
        if file is not None:
            for bad in refused:
                click.echo(f"refused line {bad['line']}: {printable(bad['reason'])}", err=True)
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
    with _open(ctx, write=False) as lib:
        arts = lib.catalog.list_artifacts(include_unverified=show_all)
        solutions = {a.solution_id: lib.catalog.get_solution(a.solution_id) for a in arts}
    rows = [{"artifact": a.sha256, "problem_id": a.problem_id, "tokens": a.token_count, "bytes": a.size_bytes,
             "model": a.model_name, "fingerprint": a.fingerprint_digest, "created_at": a.created_at,
             "unverified": bool(getattr(solutions.get(a.solution_id), "unverified", False))}
            for a in arts]
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        mark = "UNVERIFIED " if r["unverified"] else ""
        click.echo(f"{r['artifact'][:16]}  {mark}{printable(r['problem_id'], 40):<28} {r['tokens']:>6} tok "
                   f"{r['bytes'] / 1e6:>8.2f} MB  {printable(r['model'], 40)}  fp {r['fingerprint'][:12]}")
    n_unverified = sum(r["unverified"] for r in rows)
    click.echo(f"{len(rows)} artifacts ({n_unverified} unverified), "
               f"{sum(int(r['tokens']) for r in rows):,} stored tokens"
               + ("" if show_all else "; --all also lists unverified deposits"))


@library.command("show")
@click.argument("artifact_id")
@click.pass_context
def show(ctx: click.Context, artifact_id: str) -> None:
    """Show one artifact: its catalog row, problem, solution and checked header.

    \b
    Example:
      flywheel library show c7bcf81b
    """
    from flywheel.domain import ShaPrefix
    from flywheel.errors import ArtifactNotFoundError

    with _open(ctx, write=False) as lib:
        row = lib.catalog.get_artifact(ShaPrefix(artifact_id))
        sol = lib.catalog.get_solution(row.solution_id)
        prob = lib.catalog.get_problem(row.problem_id)
        try:
            header = lib.checked_read(row.sha256).header   # hashed once
        except ArtifactNotFoundError:
            header = None
    out = {"artifact": row.sha256, "problem_id": row.problem_id, "problem": prob.text if prob else None,
           "solution": sol.text if sol else None, "answer": sol.answer if sol else None,
           "verdict": sol.verdict_status if sol else None, "unverified": sol.unverified if sol else None,
           "deposited_by": sol.deposited_by if sol else None, "tokens": row.token_count, "bytes": row.size_bytes,
           "fingerprint": json.loads(row.fingerprint_json), "file": "missing" if header is None else "ok (hash checked)",
           "layers": [layer.kind for layer in header.layers] if header else None,
           "logits_sha256": row.logits_sha256}
    click.echo(json.dumps(out, indent=2, default=str))


@library.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.option("--repair", is_flag=True, help="First remove artifact files no catalog row names (then verify).")
@click.pass_context
def scan(ctx: click.Context, as_json: bool, repair: bool) -> None:
    """Re-hash every artifact and compare catalog, store and index; exit 1 naming each disagreement.

    Reports missing or corrupt files, files without a catalog row, and index entries the
    catalog lacks or catalogued artifacts the index lacks (an interrupted deposit: the next
    deposit or run repairs the index). Nothing is written, so a read-only library can be checked;
    with --repair, files without a catalog row are removed first.

    \b
    Examples:
      flywheel library verify
      flywheel library verify --repair
    """
    with _open(ctx, write=repair) as lib, progress_display("verifying", show_pos=False) as progress:
        for sha in lib.repair() if repair else []:
            click.echo(f"removed {sha[:16]}: its file had no catalog row", err=True)
        scan = lib.scan(progress=progress)
    bad = [asdict(f) for f in scan.findings]
    for note in scan.notes:
        click.echo(f"note: {printable(note)}", err=True)
    if as_json:
        echo_json({"checked": scan.checked, "bad": bad})
    else:
        for b in bad:
            click.echo(f"BAD {b['artifact'][:16] or '-'} {printable(b['problem'], 60)}: {printable(b['reason'])}")
        click.echo(f"{scan.checked} artifacts checked, {len(bad)} bad")
    ctx.exit(1 if bad else 0)


@library.command("export")
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite BUNDLE if it exists.")
@click.option("--solutions", is_flag=True,
              help="Write the verified solutions as a JSONL table for `flywheel deposit --file` instead of a "
                   "bundle: texts only, no artifacts; depositing it rebuilds the grafts for any model.")
@click.pass_context
def export(ctx: click.Context, bundle: Path, force: bool, solutions: bool) -> None:
    """Write a bundle (a tar of artifacts plus a manifest of hashes, fingerprints and solutions).

    With --solutions, write the verified solutions alone as a JSONL table (id, problem, solution,
    answer, reference): kilobytes instead of megabytes, for another machine or another model.
    Deposited on the model that made them, the rebuilt artifacts are byte-identical (same SHA-256).
    An existing file is never overwritten unless --force is given.

    \b
    Examples:
      flywheel library export library-bundle.tar
      flywheel library export --solutions solutions.jsonl
      flywheel --library other/ deposit --file solutions.jsonl
    """
    from flywheel.bundle import check_export_target, export_bundle, export_solutions

    check_export_target(bundle, force=force, solutions=solutions)   # before the catalog is opened
    with _open(ctx, write=False) as lib:
        if solutions:
            n = export_solutions(lib, bundle, force=force)
            click.echo(f"exported {n} verified solutions to {bundle} (deposit them with `flywheel deposit --file`)")
        else:
            n = export_bundle(lib, bundle, force=force)
            click.echo(f"exported {n} artifacts to {bundle}")


@library.command("import")
@click.argument("bundle", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--any-fingerprint", is_flag=True, help="Also import artifacts made on another setup (never grafted here).")
@click.option("--unverified", "allow_unverified", is_flag=True,
              help="Import answers the verifier cannot check, marked unverified (never routed unless asked). "
                   "Contradicted answers are refused regardless.")
@click.pass_context
def import_(ctx: click.Context, bundle: Path, any_fingerprint: bool, allow_unverified: bool) -> None:
    """Import a bundle all or nothing, re-checking everything in it.

    Every artifact is hash- and fingerprint-checked, its tokens must be the graft text of the
    problem and solution it is filed under, and every answer is re-verified. One bad entry
    anywhere refuses the whole bundle and leaves the library as it was. Artifacts made under
    another fingerprint are skipped (listed) unless --any-fingerprint.

    \b
    Example:
      flywheel --library other/ library import library-bundle.tar
    """
    from flywheel.bundle import import_bundle
    from flywheel.config import validate_library_path

    validate_library_path(settings_of(ctx).library, write=True)  # before loading the model
    engine = _engine(ctx)
    with _open(ctx) as lib:
        report = import_bundle(lib, bundle, engine, any_fingerprint=any_fingerprint,
                               allow_unverified=allow_unverified)
    for sha, reason in report.skipped:
        click.echo(f"skipped {sha[:16]}: {printable(reason)}", err=True)
    click.echo(f"imported {report.imported} ({report.unverified} unverified), already present {report.present}, "
               f"skipped {len(report.skipped)} made under another fingerprint")


@library.command("rebuild")
@click.pass_context
def rebuild(ctx: click.Context) -> None:
    """Re-prefill every stored solution for the current model (old artifacts are never grafted by it).

    \b
    Example:
      flywheel --model smollm2-135m library rebuild
    """
    engine = _engine(ctx)
    with _open(ctx) as lib, progress_display("rebuilding", show_pos=False) as progress:
        done = lib.rebuild(engine, progress=progress)
    if not done:
        raise InputError("the library holds no solutions to rebuild")
    click.echo(f"rebuilt {done} solutions for {engine.fingerprint.model} (fingerprint {engine.fingerprint.digest[:12]})")
