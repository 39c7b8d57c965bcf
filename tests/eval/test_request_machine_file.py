"""A machine TOML named by path travels with the evaluation request (kegen.eval.request): a worker on
another machine (Ray) has neither the driver's file nor its working directory."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kegen.eval.request import EvalRequest, FileRef
from mtia_sim.machine import MACHINES_DIR

EXAMPLE = Path(__file__).resolve().parents[2] / "kegen" / "examples" / "vector_add"


def _slow_machine(folder: Path) -> Path:
    """mtia-2i with a quarter of its DRAM bandwidth, as a user's own machine file."""
    text = (MACHINES_DIR / "mtia-2i.toml").read_text()
    assert "bw = 204.8e9" in text
    path = folder / "slow.toml"
    path.write_text(text.replace('name = "mtia-2i"', 'name = "slow-dram"').replace("bw = 204.8e9", "bw = 51.2e9"))
    return path


def _request(problem: Path, machine: str) -> EvalRequest:
    return EvalRequest(FileRef.of(problem), (EXAMPLE / "seed.py").read_text(), target="mtia", machine=machine,
                       overrides={"trials": 1, "profile": False, "seed": 1})


def test_a_machine_file_is_carried_and_a_worker_without_it_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    slow = _slow_machine(tmp_path)
    request = _request(EXAMPLE / "problem.py", "slow.toml")  # relative to the driver's directory
    assert request.machine_file == FileRef(str(slow.resolve()), slow.read_text())
    shipped = pickle.loads(pickle.dumps(request))  # what an executor sends
    assert shipped.machine_here(tmp_path / "scratch") == str(slow.resolve())  # same text here: used as is
    slow.unlink()  # the worker's machine lacks it
    copy = Path(shipped.machine_here(tmp_path / "scratch"))
    assert copy.is_file() and copy.read_text() == request.machine_file.text and copy.name == "slow.toml"
    assert shipped.config(str(copy)).machine == str(copy)


def test_a_machine_name_is_left_to_the_worker() -> None:
    request = _request(EXAMPLE / "problem.py", "mtia-300")
    assert request.machine_file is None and request.machine_here(Path("/nonexistent")) == "mtia-300"
    assert _request(EXAMPLE / "problem.py", "missing/dir/x.toml").machine_file is None  # the worker says why


@pytest.mark.slow
def test_a_request_evaluates_on_the_carried_machine_after_the_file_is_gone(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"  # 4 MiB of traffic: DRAM time well above launch overheads
    problem.write_text((EXAMPLE / "problem.py").read_text().replace("N = 8192", "N = 1 << 18"))
    (tmp_path / "driver").mkdir()
    slow = _slow_machine(tmp_path / "driver")
    request = _request(problem, str(slow))
    slow.unlink()
    results = {m: r.evaluate() for m, r in (("slow", request), ("mtia-2i", _request(problem, "mtia-2i")))}
    assert all(r.status.value == "ok" for r in results.values()), {m: r.message for m, r in results.items()}
    ratio = results["slow"].candidate_time_s / results["mtia-2i"].candidate_time_s
    assert 2.0 < ratio < 4.2, ratio  # streaming at a quarter of the bandwidth (plus fixed overheads)
