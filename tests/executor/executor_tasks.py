"""Module-level tasks and evaluators for the executor tests (workers import them by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from kegen.eval.request import EvalRequest
from kegen.search.fitness import Outcome


def square(x: int) -> int:
    return x * x


def env(name: str) -> str | None:
    return os.environ.get(name)


def boom(message: str) -> None:
    raise ValueError(message)


def die_once(marker: str, value: int) -> int:
    """SIGKILL this worker the first time (marker absent), answer `value` after."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return value
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
    return -1


def always_die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def slow_square(x: int, delay_s: float) -> int:
    time.sleep(delay_s)
    return x * x


def hanging_eval(request: EvalRequest) -> Outcome:
    """Start a grandchild in its own session (as the eval sandbox does), record both pids in
    $KEGEN_TEST_PIDS, then wait for ever: only the driver's death can end this."""
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    pids = Path(os.environ["KEGEN_TEST_PIDS"])
    pids.mkdir(parents=True, exist_ok=True)
    (pids / f"{os.getpid()}.pid").write_text(f"{os.getpid()} {child.pid}\n")
    child.wait()
    return Outcome(status="runtime_error", message="the grandchild ended")


def victim_eval(request: EvalRequest) -> Outcome:
    """The first call of a run writes $KEGEN_TEST_PIDS/victim.pid and waits to be killed by the test;
    every other call (the victim's retry included) is `pid_logging_eval`."""
    pids = Path(os.environ["KEGEN_TEST_PIDS"])
    pids.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(pids / "victim.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return pid_logging_eval(request)
    (pids / "victim.tmp").write_text(str(os.getpid()))
    (pids / "victim.tmp").rename(pids / "victim.pid")
    time.sleep(300)
    raise AssertionError("the test did not kill this worker")


def pid_logging_eval(request: EvalRequest) -> Outcome:
    """fake_eval's scores, slowed down, with this worker's pid in $KEGEN_TEST_PIDS (a test kills one)."""
    from tests.search import fake_eval

    pids = Path(os.environ["KEGEN_TEST_PIDS"])
    pids.mkdir(parents=True, exist_ok=True)
    (pids / f"{os.getpid()}-{time.monotonic_ns()}.pid").write_text(str(os.getpid()))
    time.sleep(float(os.environ.get("KEGEN_TEST_EVAL_SLEEP", "0.5")))
    return fake_eval.evaluate(request)


def kill_once_eval(request: EvalRequest) -> Outcome:
    """fake_eval's scores; the first evaluation of the run SIGKILLs its own worker instead."""
    from tests.search import fake_eval

    marker = Path(os.environ["KEGEN_TEST_PIDS"]) / "killed-one"
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return fake_eval.evaluate(request)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")
