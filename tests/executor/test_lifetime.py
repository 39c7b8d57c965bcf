"""Workers die with their driver: `kill -9` of a running `kegen evolve --jobs 2` takes its
evaluation workers, what they started in sessions of their own, and multiprocessing's resource
tracker with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kegen.executor.lifetime import descendants
from tests.search.search_helpers import fake_evolve_argv


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a zombie has exited (its reaper is not ours)


def _wait_for(pred, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def test_kill_9_of_evolve_leaves_nothing_running(tmp_path):
    pids_dir = tmp_path / "pids"
    argv = fake_evolve_argv("softmax", tmp_path / "s.db", tmp_path / "out", 6)
    argv[argv.index("--jobs") + 1] = "2"
    argv[argv.index("--evaluator") + 1] = "tests.executor.executor_tasks:hanging_eval"
    env = dict(os.environ, KEGEN_TEST_PIDS=str(pids_dir))
    driver = subprocess.Popen([sys.executable, "-m", "kegen", *argv], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        started = _wait_for(lambda: len(list(pids_dir.glob("*.pid"))) >= 2 or driver.poll() is not None, 180)
        assert started and driver.poll() is None, driver.stderr.read().decode()[-2000:] if driver.stderr else ""
        grandchildren = [int(p.read_text().split()[1]) for p in pids_dir.glob("*.pid")]
        tree = descendants(driver.pid)
        assert len(tree) >= 5  # 2 workers, their 2 grandchildren, the resource tracker
        assert set(grandchildren) <= set(tree)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        gone = _wait_for(lambda: not any(_alive(p) for p in tree), 15)
        assert gone, f"still running after the driver's kill -9: {[p for p in tree if _alive(p)]}"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        for p in descendants(driver.pid):
            os.kill(p, signal.SIGKILL)
