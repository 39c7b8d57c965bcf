"""Local worker processes (`--executor local --jobs N`): a small pool that knows which task each
worker holds, so a worker that dies costs exactly its own task one retry (a
`ProcessPoolExecutor` would break and fail every task in flight).

Workers are spawned (fresh interpreters) from one dispatcher thread that lives as long as the
pool, and call `die_with_parent` first: a `kill -9` of the driver takes them, and everything they
started, with it.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from kegen.executor.base import EvalExecutor, InfrastructureError
from kegen.executor.lifetime import die_with_parent, kill_tree

MAX_START_FAILURES = 3
JOIN_S = 2.0
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def threads_per_worker(jobs: int, cpus: int | None = None) -> int:
    """Each worker's share of the machine's cores (at least 1): N workers each running torch with a
    thread per core would oversubscribe the machine N times over."""
    return max(1, (cpus or os.cpu_count() or 1) // max(jobs, 1))


def share_threads(workers: int, cpus: int | None = None) -> int:
    """Set the thread variables (where the user has not) to each of `workers` processes' share of
    the cores, for pools started side by side from this process (their workers inherit them: each
    pool alone would give its own few workers all the cores). Returns the share."""
    share = threads_per_worker(workers, cpus)
    for var in THREAD_VARS:
        os.environ.setdefault(var, str(share))
    return share


@dataclass
class _Task:
    id: int
    blob: bytes
    future: Future[Any]
    attempts: int = 0


@dataclass
class _Worker:
    proc: Any  # multiprocessing.Process (spawn context)
    conn: Connection
    task: _Task | None = None
    done: int = 0
    lost: list[str] = field(default_factory=list)


def _portable(exc: BaseException) -> BaseException:
    try:
        pickle.dumps(exc)
        return exc
    except Exception:  # an exception that does not pickle still reaches the caller, as text
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _worker_main(conn: Connection, parent_pid: int, threads: int) -> None:
    """A worker: run (task id, pickled (fn, args)) messages until the pipe closes."""
    die_with_parent(parent_pid)
    for var in THREAD_VARS:  # inherited by the evaluation processes it starts; a user's setting wins
        os.environ.setdefault(var, str(threads))
    if "torch" in sys.modules:  # imported before the variables were set (by the parent's main module)
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        tid, blob = msg
        try:
            fn, args = pickle.loads(blob)
            reply: tuple[int, bool, Any] = (tid, True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the task's failure goes back to its future
            reply = (tid, False, _portable(exc))
        try:
            conn.send(reply)
        except Exception as exc:  # the result itself did not pickle
            conn.send((tid, False, RuntimeError(f"the task's result could not be sent back: {exc}")))


class LocalProcessExecutor(EvalExecutor):
    """`jobs` spawned worker processes on this machine; lost tasks are retried `max_retries` times."""

    name = "local"

    def __init__(self, jobs: int, max_retries: int = 2) -> None:
        if jobs < 1:
            raise ValueError(f"a local process pool needs jobs >= 1, got {jobs}")
        self.slots = jobs
        self.max_retries = max_retries
        self._ctx = multiprocessing.get_context("spawn")
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._queue: deque[_Task] = deque()
        self._closed = False
        self._broken: str | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._workers: list[_Worker] = []
        self._thread = threading.Thread(target=self._dispatch, name="kegen-executor", daemon=True)
        self._thread.start()

    # ---- caller side ---------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            blob = pickle.dumps((fn, args))
        except Exception as exc:
            name = getattr(fn, "__name__", fn)
            fut.set_exception(TypeError(f"task {name!r} cannot be sent to a worker: {exc}"))
            return fut
        with self._lock:
            if self._closed:
                raise RuntimeError("submit on an executor that was shut down")
            if self._broken:
                fut.set_exception(InfrastructureError(self._broken))
                return fut
            self._queue.append(_Task(next(self._ids), blob, fut))
        self._wake()
        return fut

    def shutdown(self, cancel: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued = list(self._queue) if cancel else []
            if cancel:
                self._queue.clear()
        for t in queued:
            t.future.cancel()
        self._wake()
        self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def worker_pids(self) -> list[int]:
        """The live workers' process ids (tests and diagnostics)."""
        return [w.proc.pid for w in list(self._workers) if w.proc.is_alive()]

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    # ---- dispatcher thread ---------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        args = (child, os.getpid(), threads_per_worker(self.slots))
        proc = self._ctx.Process(target=_worker_main, args=args, name="kegen-eval-worker")
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def _dispatch(self) -> None:
        start_failures = 0
        try:
            self._workers = [self._spawn() for _ in range(self.slots)]
            while True:
                with self._lock:
                    if self._closed:
                        break
                self._assign()
                busy = {w.conn: w for w in self._workers if w.task is not None}
                dead = {w.proc.sentinel: w for w in self._workers}
                ready = wait([*busy, *dead, self._wake_r])
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                for conn in ready:
                    if conn in busy:
                        self._receive(busy[conn])
                for sentinel in ready:
                    if sentinel in dead:
                        w = dead[sentinel]
                        start_failures = 0 if w.done else start_failures + 1
                        self._replace(w, start_failures)
        except Exception as exc:  # a bug here must not leave callers waiting forever
            self._fail_all(f"the executor's dispatcher failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            self._stop_workers()

    def _assign(self) -> None:
        for w in self._workers:
            if w.task is not None:
                continue
            with self._lock:
                task = self._queue.popleft() if self._queue else None
            if task is None:
                return
            if task.attempts == 0 and not task.future.set_running_or_notify_cancel():
                continue  # cancelled while queued (a retried task is already running)
            w.task = task
            try:
                w.conn.send((task.id, task.blob))
            except OSError:  # the worker is dead; its sentinel says so next round
                pass

    def _receive(self, w: _Worker) -> None:
        try:
            tid, ok, payload = w.conn.recv()
        except (EOFError, OSError):
            return  # died mid-task: handled through its sentinel
        task, w.task = w.task, None
        w.done += 1
        if task is None or task.id != tid:  # cannot happen with one task per worker; be loud if it does
            raise RuntimeError(f"worker {w.proc.pid} answered task {tid}, not {task and task.id}")
        if ok:
            task.future.set_result(payload)
        else:
            task.future.set_exception(payload)

    def _replace(self, w: _Worker, start_failures: int) -> None:
        w.proc.join(timeout=JOIN_S)
        code = w.proc.exitcode
        why = f"exit code {code}"
        if code is not None and code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        kill_tree(w.proc.pid)
        w.conn.close()
        self._workers.remove(w)
        task = w.task
        if task is not None:
            task.attempts += 1
            if task.attempts > self.max_retries:
                task.future.set_exception(InfrastructureError(
                    f"evaluation worker (pid {w.proc.pid}) was lost ({why}) on each of {task.attempts} "
                    "attempts; the task is recorded as an infrastructure failure"))
            else:
                with self._lock:
                    self._queue.appendleft(task)
        if start_failures >= MAX_START_FAILURES:
            self._fail_all(f"evaluation workers die before finishing any task ({why}, {start_failures} times "
                           "in a row); check that kegen imports in a fresh interpreter")
            return
        self._workers.append(self._spawn())

    def _fail_all(self, message: str) -> None:
        with self._lock:
            self._broken = message
            queued, self._queue = list(self._queue), deque()
        for t in queued:
            if t.future.set_running_or_notify_cancel():
                t.future.set_exception(InfrastructureError(message))

    def _stop_workers(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in self._workers:
            if w.task is not None:  # running work is abandoned: kill it (and what it started) now
                kill_tree(w.proc.pid, include_self=True)
        for w in self._workers:
            w.proc.join(timeout=JOIN_S)
            if w.proc.is_alive():
                kill_tree(w.proc.pid, include_self=True)
                w.proc.join(timeout=JOIN_S)
            if w.task is not None and not w.task.future.done():
                w.task.future.set_exception(InfrastructureError("the executor shut down during this task"))
            w.conn.close()
        self._workers = []
