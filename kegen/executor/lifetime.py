"""Worker processes that die with their driver (Linux), and the clean-up of what they started.

A worker calls `die_with_parent(driver_pid)` first thing. Two mechanisms, because each has a gap:

* `PR_SET_PDEATHSIG` (prctl): the kernel signals the worker the moment its parent *thread* exits.
  kegen's pools start workers from one long-lived dispatcher thread, so that is the driver's life.
* a watchdog thread polling `getppid()`: covers a parent that died before the prctl call and any
  platform without prctl.

Either way the worker first kills every process it started (sandboxed evaluation workers run in
their own sessions, so a process-group kill would miss them: the tree is walked in /proc), then
exits. The evaluation zygote also stops by itself when its stdin (held by the worker) closes.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from kegen.proctree import descendants

PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 0.25


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent thread exits; False if unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def kill_tree(pid: int, include_self: bool = False) -> None:
    """SIGKILL every descendant of `pid` (and `pid` itself if asked)."""
    for p in descendants(pid) + ([pid] if include_self else []):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _orphaned(*_: object) -> None:
    kill_tree(os.getpid())
    os._exit(70)


def die_with_parent(parent_pid: int) -> None:
    """Make this process (and everything it starts) go away when `parent_pid` does."""
    if set_parent_death_signal(signal.SIGTERM):
        try:
            signal.signal(signal.SIGTERM, _orphaned)
        except ValueError:  # not the main thread: the watchdog below still applies
            pass
    if os.getppid() != parent_pid:  # the parent died before we got here
        _orphaned()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCH_INTERVAL_S)
        _orphaned()

    threading.Thread(target=watch, name="kegen-parent-watch", daemon=True).start()
