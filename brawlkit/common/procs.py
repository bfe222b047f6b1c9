"""Ending a child process the one way every part of brawlkit does: SIGTERM (the child
closes its sockets, writes its last record or replay, says BYE), then SIGKILL if it is
still there after a grace period.  Standard library only."""

from __future__ import annotations

import subprocess
from typing import Any


def end_process(proc: subprocess.Popen[Any] | None, grace_s: float = 2.0,
                kill_wait_s: float = 5.0) -> int | None:
    """Stop ``proc`` (a no-op when it already ended); its exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=kill_wait_s)
        except ProcessLookupError:
            pass
    return proc.poll()
