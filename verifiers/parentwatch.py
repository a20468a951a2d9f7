"""A worker process that ends when its parent does: the bounded workers run in sessions of their own (so a
Ctrl-C in the terminal reaches the parent only), which also means no signal reaches them when the parent is
killed outright (kill -9). `exit_with_parent` polls the parent's pid from a daemon thread and exits the
worker within `poll_s` of its parent's death (it is then re-parented, and `os.getppid()` changes)."""

from __future__ import annotations

import os
import threading
import time

POLL_S = 1.0


def exit_with_parent(poll_s: float = POLL_S) -> threading.Thread:
    """Start the watch (call first thing in a worker's main); returns its thread."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(0)   # nothing of the worker's is worth finishing: its answers have no reader

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
