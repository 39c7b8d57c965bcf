"""`kegen tune` killed with SIGKILL mid-run, then `kegen tune --resume RUN`: the run finishes with the
options it started with, and the steps finished before the kill are kept, not measured again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MODEL = """import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 4)
    def forward(self, x):
        return torch.relu(self.l(x)) * 2.0
def get_inputs():
    return [torch.randn(2, 8)]
def get_init_inputs():
    return []
def get_input_variants():
    return [[torch.randn(3, 8)]]
"""


def _wait_for_step(state: Path, proc: subprocess.Popen[bytes], timeout_s: float = 240.0) -> dict:
    """state.json once it holds a measured step (and the run is still going)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"kegen tune ended (rc {proc.returncode}) before it could be killed")
        try:
            done = json.loads(state.read_text())
        except (OSError, ValueError):
            done = {}
        if any(k.startswith("mtia-2i/compile/") for k in done):
            return done
        time.sleep(0.2)
    pytest.fail("no measured step in state.json in time")


@pytest.mark.slow
def test_kill_9_then_resume_finishes_and_keeps_finished_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kegen.cli import main

    model, run, lib = tmp_path / "m.py", tmp_path / "run", tmp_path / "lib.json"
    model.write_text(MODEL)
    cmd = [sys.executable, "-m", "kegen", "tune", str(model), "--budget", "1", "--out", str(run),
           "--library", str(lib), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        before = _wait_for_step(run / "state.json", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole process tree, the evaluator's workers too
        proc.wait()
    assert json.loads((run / "options.json").read_text())["budget"] == 1
    assert main(["tune", "--resume", str(run), "--json"]) == 0  # no model, no options: the run's own
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["verified"]
    assert summary["variants_checked"] == 2
    after = json.loads((run / "state.json").read_text())
    for key, value in before.items():  # a finished step is kept as it was
        assert after[key] == value, key
    assert set(after) > set(before)
    assert (run / "report.html").is_file()


def test_resume_of_a_directory_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kegen.cli import main

    (tmp_path / "m.py").write_text(MODEL)
    assert main(["tune", str(tmp_path / "m.py"), "--resume", str(tmp_path), "--json"]) == 1
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["status"] == "bad_input" and "no state.json" in last["error"]
