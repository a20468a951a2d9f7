"""Helpers every sub-command module shares."""

from __future__ import annotations

import json
from typing import Any

import click


def settings_of(ctx: click.Context) -> Any:
    """The global `Settings` (library, db, model) set by the `flywheel` group."""
    root = ctx.find_root()
    if root.obj is None:
        raise click.UsageError("run this through the `flywheel` command")
    return root.obj


def echo_json(payload: Any) -> None:
    """One JSON object on one line (the last line of output, for machines)."""
    click.echo(json.dumps(payload, sort_keys=True, default=str))
