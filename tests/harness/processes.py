"""Helpers for tests that start and signal child processes."""

from __future__ import annotations

import signal


def ctrl_c_default() -> None:
    """preexec_fn for a child that the test stops with SIGINT: a shell starts background jobs (`cmd &`) with
    SIGINT ignored, the child would inherit that, and Ctrl-C would not reach it however the suite was launched."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
