"""GPU profile plumbing without a GPU: the ncu decision (gpu_profile full/auto/timing,
ncu_if_faster_than), the worker's kernel table as untrusted data, the ncu command and runner
(a fake ncu), and the CLI default. The real GPU path is in test_gpu.py (skipped without one)."""

from __future__ import annotations

import argparse
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kegen.eval import EvalConfig
from kegen.eval.cli_common import add_common_arguments, config_from_args
from kegen.eval.profile import Profile
from kegen.eval.trusted import memo, profile_gpu


class FakeEv(SimpleNamespace):
    """What the GPU profile reads of an Evaluator (weak-referenceable, like the real one)."""

    __hash__ = object.__hash__  # type: ignore[assignment]


def fake_ev(target: str = "nvidia", mode: str = "eval", sha: str = "p1", **cfg: Any) -> Any:
    return FakeEv(
        cfg=EvalConfig(target=target, **cfg),
        mode=mode,
        gpu=target in ("nvidia", "amd"),
        result={"machine": "Fake GPU", "details": {"problem_sha256": sha}, "times": {}},
        deadline=time.monotonic() + 60,
        problem_path=Path("problem.py"),
        candidate=Path("candidate.py"),
        seed=lambda: 1,
        mark=lambda phase: None,
    )


@pytest.fixture(autouse=True)
def _clean_memo() -> Any:
    memo.clear()
    yield
    memo.clear()


def test_auto_runs_ncu_for_the_first_and_for_improving_candidates_only() -> None:
    assert profile_gpu.want_ncu(fake_ev(), 100e-6) == (True, "")  # nothing to compare with: the seed
    run, why = profile_gpu.want_ncu(fake_ev(), 101e-6)
    assert not run and "does not improve" in why and "kegen profile" in why
    assert not profile_gpu.want_ncu(fake_ev(), 99.5e-6)[0]  # within noise (2%) of the best
    assert profile_gpu.want_ncu(fake_ev(), 90e-6)[0]
    assert not profile_gpu.want_ncu(fake_ev(), 95e-6)[0]  # the best is now 90 us
    assert profile_gpu.want_ncu(fake_ev(sha="other problem"), 500e-6)[0]  # per problem


def test_explicit_threshold_from_the_search_wins_over_the_memo() -> None:
    ev = fake_ev(extra={"ncu_if_faster_than": 50e-6})
    run, why = profile_gpu.want_ncu(ev, 60e-6)
    assert not run and "not faster than 50.00 us" in why
    assert profile_gpu.want_ncu(fake_ev(extra={"ncu_if_faster_than": 50e-6}), 40e-6)[0]
    assert not profile_gpu.want_ncu(fake_ev(sha="new", extra={"ncu_if_faster_than": 0}), 1e-9)[0]  # never


def test_full_timing_and_non_nvidia_levels() -> None:
    assert profile_gpu.want_ncu(fake_ev(gpu_profile="full"), 2e-6)[0]  # `kegen eval`: the first one
    assert not profile_gpu.want_ncu(fake_ev(), 2e-6)[0]  # a search's re-evaluation of it: no ncu
    assert profile_gpu.want_ncu(fake_ev(), 1e-6)[0]
    assert profile_gpu.want_ncu(fake_ev(gpu_profile="full"), 2e-6)[0]  # full: even when slower
    assert profile_gpu.want_ncu(fake_ev(mode="profile"), 3e-6)[0]  # kegen profile
    assert profile_gpu.want_ncu(fake_ev(extra={"ncu": True}), 3e-6)[0]
    run, why = profile_gpu.want_ncu(fake_ev(gpu_profile="timing"), 1e-9)
    assert not run and "timing" in why
    run, why = profile_gpu.want_ncu(fake_ev(target="amd", gpu_profile="full"), 1e-9)
    assert not run and "NVIDIA" in why


def test_unknown_gpu_profile_is_rejected_with_the_choices() -> None:
    with pytest.raises(ValueError, match="full, auto, timing"):
        EvalConfig(target="nvidia", gpu_profile="ncu")


def test_kernel_reply_from_the_worker_is_checked_and_bounded() -> None:
    reply = {
        "op": "gpu_kernels",
        "kernels": [
            ["add_kernel", 2, 3e-6],
            ["x" * 1000, 1, 1e-6],
            ["bad_time", 1, float("nan")],
            ["negative", -1, 1e-6],
            "not a row",
            [1, 2, 3],
        ]
        + [["k", 1, 1e-9]] * 1000,
        "jit_names": ["add_kernel", "a|b", "(.*)", 3, "ok_name"],
    }
    stats, names = profile_gpu.parse_kernel_reply(reply)
    assert len(stats) <= profile_gpu.MAX_KERNELS
    assert stats[0].name == "add_kernel" and stats[0].calls == 2
    assert all(len(k.name) <= 200 for k in stats)
    assert "bad_time" not in {k.name for k in stats} and "negative" not in {k.name for k in stats}
    assert sum(k.share for k in stats) == pytest.approx(1.0)
    assert names == {"add_kernel", "ok_name"}  # nothing that would change ncu's kernel regex


def test_build_profile_uses_the_table_and_says_why_ncu_was_skipped() -> None:
    memo.record_time(memo.problem_key(fake_ev(), "best-candidate"), 10e-6)  # an earlier, faster one
    ev = fake_ev()
    table = profile_gpu.parse_kernel_reply({"kernels": [["add_kernel", 1, 8e-6], ["sgemm_128", 1, 1e-6]]})
    profile_gpu._tables[ev] = table
    prof = profile_gpu.build_profile(ev, 20e-6, {"bytes": 1e6, "flops": 0, "fraction": 0.5})
    assert [k.name for k in prof.kernels] == ["add_kernel", "sgemm_128"]
    assert prof.metrics["launches"] == 2 and prof.metrics["kernel_time_s"] == pytest.approx(9e-6)
    assert prof.metrics["achieved_dram_bw"] == pytest.approx(1e6 / 20e-6)
    assert prof.raw["library_kernels"] == ["sgemm_128"]  # not the candidate's Triton kernel
    assert "ncu" not in prof.sources and any("ncu skipped" in n for n in prof.notes)
    assert ev.result["details"]["ncu"].startswith("ncu skipped")
    assert Profile.from_dict(prof.to_dict()).kernels[0].name == "add_kernel"


def test_build_profile_notes_a_failed_kernel_pass() -> None:
    ev = fake_ev(gpu_profile="timing")
    profile_gpu._tables[ev] = "kernel table not collected: timeout: the candidate hung"
    prof = profile_gpu.build_profile(ev, 5e-6, {})
    assert not prof.kernels and any("hung" in n for n in prof.notes)


def test_kernel_pass_does_nothing_off_gpu_or_at_timing_level() -> None:
    class NoSession:
        def request(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("no worker request expected")

    for ev in (fake_ev(target="cpu"), fake_ev(gpu_profile="timing"), fake_ev(profile=False)):
        profile_gpu.kernel_pass(ev, None, NoSession())  # type: ignore[arg-type]
        assert ev not in profile_gpu._tables


def test_kernel_pass_asks_the_worker_and_keeps_a_failure_as_a_note() -> None:
    import torch

    from kegen.eval.errors import CandidateError

    class Factory:
        def make(self, seed: int) -> list[Any]:
            return [torch.zeros(3)]

    class Session:
        def __init__(self, reply: Any) -> None:
            self.reply, self.asked = reply, []

        def request(self, header: dict[str, Any], blobs: list[bytes]) -> Any:
            self.asked.append(header["op"])
            if isinstance(self.reply, Exception):
                raise self.reply
            return self.reply, []

    ev = fake_ev()
    session = Session(
        {"op": "gpu_kernels", "kernels": [["add_kernel", 1, 2e-6]], "jit_names": ["add_kernel"]}
    )
    profile_gpu.kernel_pass(ev, Factory(), session)  # type: ignore[arg-type]
    assert session.asked == ["gpu_profile"]
    assert profile_gpu._tables[ev][1] == {"add_kernel"}
    ev = fake_ev()
    profile_gpu.kernel_pass(ev, Factory(), Session(CandidateError("timeout", "hung")))  # type: ignore[arg-type]
    assert profile_gpu._tables[ev] == "kernel table not collected: timeout: hung"
    ev = fake_ev()
    profile_gpu.kernel_pass(ev, Factory(), Session({"op": "timed"}))  # type: ignore[arg-type]
    assert "replied 'timed'" in str(profile_gpu._tables[ev])


def test_ncu_command_profiles_only_the_candidates_kernels_in_the_profiled_range(tmp_path: Path) -> None:
    cmd = profile_gpu.ncu_command("ncu", {"add_kernel", "mul_kernel", "a|.*"}, tmp_path / "q", tmp_path / "r")
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:add_kernel|mul_kernel"
    assert cmd[-4:-2] == ["-m", "kegen.eval.sandboxed.worker"]
    assert "--kernel-name" not in profile_gpu.ncu_command("ncu", set(), tmp_path / "q", tmp_path / "r")


def _fake_ncu(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


CSV = (
    '"ID","Kernel Name","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed"\n'
    '"","","nsecond","%"\n'
    '"0","add_kernel","1,000","80.5"\n'
)


def test_run_ncu_parses_the_csv_of_the_tool(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text("x = 1\n")
    ncu = _fake_ncu(tmp_path, "cat <<'EOF'\n" + CSV + "EOF")
    rows, err = profile_gpu.run_ncu(
        ncu, tmp_path / "p.py", cand, EvalConfig(target="nvidia"), {"add_kernel"}, 30
    )
    assert err is None
    assert rows == [{"kernel": "add_kernel", "time_ns": 1000.0, "dram_bw_pct": 80.5}]


def test_run_ncu_kills_the_whole_tree_on_timeout(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text("x = 1\n")
    pid_file = tmp_path / "child.pid"
    ncu = _fake_ncu(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait")
    t0 = time.monotonic()
    rows, err = profile_gpu.run_ncu(ncu, tmp_path / "p.py", cand, EvalConfig(target="nvidia"), set(), 1.0)
    assert rows == [] and err is not None and "timed out" in err
    assert time.monotonic() - t0 < 20
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the profiled process outlived ncu's timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False


def test_run_ncu_reports_a_tool_without_rows(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text("x = 1\n")
    ncu = _fake_ncu(tmp_path, "echo '==ERROR== ERR_NVGPUCTRPERM: no permission' >&2; exit 1")
    rows, err = profile_gpu.run_ncu(ncu, tmp_path / "p.py", cand, EvalConfig(target="nvidia"), set(), 30)
    assert rows == [] and err is not None and "ERR_NVGPUCTRPERM" in err


def test_the_cli_is_full_and_the_api_default_is_auto() -> None:
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    assert config_from_args(parser.parse_args(["p.py", "c.py", "--target", "nvidia"])).gpu_profile == "full"
    args = parser.parse_args(["p.py", "c.py", "--gpu-profile", "timing"])
    assert config_from_args(args).gpu_profile == "timing"
    assert EvalConfig(target="nvidia").gpu_profile == "auto"
