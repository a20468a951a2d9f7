"""Helpers every sub-command module shares."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from flywheel.domain import Progress

#: Piped output (not a terminal) gets a progress line at least this often while work goes on.
HEARTBEAT_S = 30.0


def settings_of(ctx: click.Context) -> Any:
    """The global `Settings` (library, db, model) set by the `flywheel` group."""
    root = ctx.find_root()
    if root.obj is None:
        raise click.UsageError("run this through the `flywheel` command")
    return root.obj


def echo_json(payload: Any) -> None:
    """One JSON object on one line (the last line of output, for machines)."""
    click.echo(json.dumps(payload, sort_keys=True, default=str))


@contextmanager
def progress_display(label: str, *, show_pos: bool = True, show_note: bool = False,
                     heartbeat_s: float = HEARTBEAT_S) -> Iterator[Progress]:
    """A `Progress` callback for a long command, drawn on stderr.

    On a terminal: a bar, opened at the first call (a run restarting its count opens a new bar).
    Piped (a log, CI, `make run`): a step's line at most every `heartbeat_s / 3` seconds, the
    last step always, and a `still <label>` line whenever `heartbeat_s` pass with no line, so a
    long step is never silence.
    """
    err = sys.stderr   # at call time: a test runner's stream when one is swapped in (click.get_text_stream is deprecated)
    if err.isatty():
        bar: Any = None
        note_now = [""]

        def update_bar(done: int, total: int | None, note: str) -> None:
            nonlocal bar
            note_now[0] = note
            if bar is not None and done < bar.pos:    # another run counting from the start
                bar.__exit__(None, None, None)
                bar = None
            if bar is None:
                bar = click.progressbar(length=total, label=label, file=err,
                                        show_pos=show_pos, item_show_func=(lambda _: note_now[0]) if show_note else None)
                bar.__enter__()
            bar.update(done - bar.pos)

        try:
            yield update_bar
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
        return

    start = time.monotonic()
    lock = threading.Lock()
    # The first step line waits a third of a beat like the rest: a resumed run reports the problems it reads
    # back as a burst at the start, and its first line should say how many, not "1/N".
    last_at, last_step, line = [start], [start], [f"{label}: started"]
    stop = threading.Event()

    def emit(text: str) -> None:   # under `lock`
        last_at[0] = time.monotonic()
        click.echo(f"[{last_at[0] - start:6.0f} s] {text}", err=True)

    def update_line(done: int, total: int | None, note: str) -> None:
        with lock:
            before = line[0]
            line[0] = f"{label}: {done}" + (f"/{total}" if total else "") + (f" ({note})" if note and show_note else "")
            # Nothing finished yet and a new phase named (taking problems, loading the model): said at once,
            # so the first lines say what a run is doing, not "started".
            phase = done == 0 and show_note and line[0] != before
            if phase or time.monotonic() - last_step[0] >= heartbeat_s / 3 or (total and done >= total):
                emit(line[0])
                last_step[0] = last_at[0]

    def beat() -> None:
        while not stop.wait(min(1.0, heartbeat_s / 4)):
            with lock:
                if time.monotonic() - last_at[0] >= heartbeat_s:
                    emit(f"still {line[0]}")

    ticker = threading.Thread(target=beat, name=f"progress-{label}", daemon=True)
    ticker.start()
    try:
        yield update_line
    finally:
        stop.set()
        ticker.join()
