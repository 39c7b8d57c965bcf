"""Evaluations on a real local Ray cluster (127.0.0.1, head + one worker node): a search and
`kegen evolve --executor ray` run on it, a Ray worker is killed mid-evaluation, and nothing is lost
or evaluated twice.

Run by test_ray.py inside a private network namespace with loopback only: Ray replaces
127.0.0.1 by the host's outward address wherever it has one, and there it has none."""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from kegen.cli import main
from kegen.executor import ExecutorSpec, InfrastructureError, make_executor
from kegen.search.config import EvalSliceConfig, SearchConfig, StoreConfig, TerminationConfig
from kegen.search.loop import run_search
from kegen.search.store import GraphStore
from tests.search.search_helpers import EXAMPLES, fake_evolve_argv

pytest.importorskip("ray")
pytestmark = pytest.mark.skipif(os.environ.get("KEGEN_RAY_NETNS") != "1",
                                reason="run through test_ray.py (a loopback-only network namespace)")


def _kill_victim(pids_dir: Path, killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the Ray worker running the victim evaluation (executor_tasks.victim_eval) once it starts."""
    victim = pids_dir / "victim.pid"
    while not stop.is_set() and not killed:
        if victim.is_file():
            pid = int(victim.read_text())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.05)


def test_search_on_ray_survives_a_killed_worker(ray_cluster, tmp_path, monkeypatch):
    pids_dir, log = tmp_path / "pids", tmp_path / "evals.log"
    monkeypatch.setenv("KEGEN_TEST_PIDS", str(pids_dir))
    monkeypatch.setenv("KEGEN_FAKE_EVAL_LOG", str(log))  # read by the workers (same machine)
    config = SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=EXAMPLES / "softmax" / "seed.py",
        out_dir=tmp_path / "out",
        termination=TerminationConfig(max_evaluations=6),
        eval=EvalSliceConfig(jobs=2, evaluator="tests.executor.executor_tasks:victim_eval", executor="ray",
                             ray_address=ray_cluster),
        store=StoreConfig(db=tmp_path / "s.db", warm_start=False),
        progress=False,
    )
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_victim, args=(pids_dir, killed, stop), daemon=True)
    killer.start()
    try:
        result = run_search(config)
    finally:
        stop.set()
        killer.join()
    assert killed, "no evaluation started on the cluster"
    store = GraphStore(result.db)
    nodes = store.nodes(result.run_id)
    assert store.pending(result.run_id) == []  # nothing lost
    assert len(nodes) == 7 and result.evaluations == 6
    statuses = [store.evaluation(n.id).status for n in nodes]  # type: ignore[union-attr]
    assert "infra_error" not in statuses and "runtime_error" not in statuses, statuses
    lines = log.read_text().split()
    ends = collections.Counter(h for kind, h in zip(lines[::2], lines[1::2], strict=True) if kind == "end")
    assert set(ends.values()) == {1}  # nothing evaluated twice to completion
    attempts = sorted(p.name for p in pids_dir.glob("*.pid"))
    assert len(attempts) == sum(ends.values()) + 1, (attempts, killed, lines)  # the victim, then 7 that ended
    store.close()


def test_evolve_cli_on_ray(ray_cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KEGEN_TEST_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("KEGEN_TEST_EVAL_SLEEP", "0")
    argv = fake_evolve_argv("softmax", tmp_path / "s.db", tmp_path / "out", 4,
                            "--executor", "ray", "--ray-address", ray_cluster)
    argv[argv.index("--evaluator") + 1] = "tests.executor.executor_tasks:pid_logging_eval"
    argv[argv.index("--jobs") + 1] = "2"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "best speedup found" in out
    workers = {p.read_text() for p in (tmp_path / "pids").glob("*.pid")}
    assert workers and str(os.getpid()) not in workers  # evaluated on Ray workers, not in the driver


def test_ray_passes_task_errors_through_and_reports_missing_gpus(ray_cluster):
    from tests.executor import executor_tasks as tasks

    with make_executor(ExecutorSpec("ray", jobs=2, ray_address=ray_cluster)) as ex:
        assert ex.slots == 2
        assert ex.submit(tasks.square, 5).result(timeout=120) == 25
        with pytest.raises(ValueError, match="broken problem"):
            ex.submit(tasks.boom, "broken problem").result(timeout=120)
        with pytest.raises(InfrastructureError, match="Ray lost the task"):
            ex.submit(tasks.always_die).result(timeout=180)
    with pytest.raises(RuntimeError, match="has no GPU"):
        make_executor(ExecutorSpec("ray", ray_address=ray_cluster, target="nvidia"))


def test_bench_cli_on_ray_evaluates_seeds_on_the_cluster(ray_cluster, tmp_path, capsys):
    import json

    out = tmp_path / "bench"
    code = main(["bench", "default", "--problems", "gelu,row_sum", "--no-search", "--no-progress",
                 "--executor", "ray", "--ray-address", ray_cluster, "--out", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    rows = {p["name"]: p for p in json.loads((out / "results.json").read_text())["problems"]}
    assert set(rows) == {"gelu", "row_sum"}
    assert all(r["seed_status"] == "ok" for r in rows.values()), rows


def test_bench_spreads_problems_over_one_shared_executor(ray_cluster, tmp_path):
    from kegen.bench.runner import BenchConfig, SearchOutcome, SeedEval, run_bench
    from tests.executor import executor_tasks as tasks

    seen: list[tuple[str, int]] = []

    def search(problem, config, out_dir, executor=None):
        assert executor is not None  # the bench's shared Ray executor, not one per search
        seen.append((problem.name, id(executor)))
        value = executor.submit(tasks.square, 3).result(timeout=120)
        seed = SeedEval(status="ok", speedup=1.0, time_s=1e-6)
        return SearchOutcome("done", evaluations=1, seed=seed, found_correct=True, gain=float(value) / 3)

    config = BenchConfig(problems=("gelu", "row_sum", "softmax"), budget=2, jobs=2, executor="ray",
                         ray_address=ray_cluster, out_dir=tmp_path / "b", progress=False)
    report = run_bench(config, search_problem=search)
    from kegen.suites import find_suite

    order = [p.name for p in find_suite("default").select(["gelu", "row_sum", "softmax"]).problems]
    assert [p.name for p in report.problems] == order  # the suite's order, whatever finished first
    assert len({ex for _, ex in seen}) == 1 and len(seen) == 3
    assert all(p.best_speedup == 3.0 for p in report.problems)
