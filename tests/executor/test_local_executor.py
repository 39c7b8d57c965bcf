"""The local process pool: results, errors, a killed worker retried exactly once, retries running out."""

from __future__ import annotations

import os
import time

import pytest

from kegen.executor import ExecutorSpec, InfrastructureError, InlineExecutor, make_executor
from kegen.executor.local import LocalProcessExecutor
from tests.executor import executor_tasks as tasks


@pytest.fixture(scope="module")
def pool():
    ex = make_executor(ExecutorSpec("local", jobs=2, max_retries=1))
    assert isinstance(ex, LocalProcessExecutor)
    yield ex
    ex.shutdown()


def test_results_and_task_errors(pool):
    futs = [pool.submit(tasks.square, i) for i in range(6)]
    assert [f.result(timeout=120) for f in futs] == [i * i for i in range(6)]
    with pytest.raises(ValueError, match="bad input"):
        pool.submit(tasks.boom, "bad input").result(timeout=60)
    with pytest.raises(TypeError, match="cannot be sent"):
        pool.submit(lambda: 1).result(timeout=5)


def test_a_killed_worker_costs_one_retry_of_its_own_task(pool, tmp_path):
    before = set(pool.worker_pids())
    others = [pool.submit(tasks.slow_square, i, 0.3) for i in range(3)]
    marker = str(tmp_path / "died")
    assert pool.submit(tasks.die_once, marker, 7).result(timeout=120) == 7
    assert os.path.exists(marker)
    assert [f.result(timeout=120) for f in others] == [0, 1, 4]  # untouched by the death
    assert len(pool.worker_pids()) == 2 and set(pool.worker_pids()) != before  # replaced


def test_retries_run_out_into_an_infrastructure_error(pool):
    with pytest.raises(InfrastructureError, match="lost .* on each of 2 attempts"):
        pool.submit(tasks.always_die).result(timeout=120)
    assert pool.submit(tasks.square, 3).result(timeout=120) == 9  # the pool still works


def test_shutdown_cancels_queued_work_and_refuses_more():
    ex = LocalProcessExecutor(1)
    running = ex.submit(tasks.slow_square, 2, 30)
    queued = ex.submit(tasks.square, 1)
    deadline = time.monotonic() + 60
    while not running.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    ex.shutdown()
    assert queued.cancelled()
    with pytest.raises(InfrastructureError):
        running.result(timeout=10)
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit(tasks.square, 1)


def test_workers_share_the_cores(pool, monkeypatch):
    from kegen.executor.local import threads_per_worker

    assert threads_per_worker(4, cpus=16) == 4 and threads_per_worker(32, cpus=16) == 1
    expected = os.environ.get("OMP_NUM_THREADS") or str(threads_per_worker(2))
    assert pool.submit(tasks.env, "OMP_NUM_THREADS").result(timeout=60) == expected


def test_spec_validation_and_inline():
    assert isinstance(make_executor(ExecutorSpec("local", jobs=0)), InlineExecutor)
    assert make_executor(ExecutorSpec("local", jobs=0)).submit(tasks.square, 4).result() == 16
    with pytest.raises(ValueError, match="unknown executor"):
        ExecutorSpec("dask")
    with pytest.raises(ValueError, match="needs --executor ray"):
        ExecutorSpec("local", ray_address="127.0.0.1:6379")
