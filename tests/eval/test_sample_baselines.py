"""On mtia the seed (baseline candidate) is timed on each timed sample's own inputs, and a search's
candidates on its run's draws (docs/DECISIONS.md D49).

A gathering or jagged problem's draws differ in work by several percent; the seed used to be timed
once per process on a draw of its own, so two workers of one search measured the same seed at 201
and 213 us and ranked candidates by that noise. Now the seed runs on the same inputs as the
candidate, and within a run every candidate is timed on the same draws.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eval_helpers import small_jagged

from kegen.suites import find_suite


@pytest.fixture
def seed_runs(monkeypatch) -> Iterator[list[int]]:  # noqa: ANN001
    """How many draws each run of the seed (the baseline candidate) covered, with a clean memo."""
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval.trusted import baselines, memo

    memo.clear()
    runs: list[int] = []
    real = baselines._time_candidate_baseline

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        out = real(*args, **kwargs)
        runs.append(len(out))
        return out

    monkeypatch.setattr(baselines, "_time_candidate_baseline", spy)
    yield runs
    memo.clear()


@pytest.mark.slow
def test_the_seed_against_itself_reads_one_on_every_draw(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    path, seed = small_jagged(tmp_path)
    # the same kernel under another source hash: timed as a candidate, not taken as the baseline
    same_kernel = seed.read_text() + "\n# a copy of the seed\n"
    r = evaluate(path, same_kernel, baseline=seed,
                 config=EvalConfig(target="mtia", trials=3, timing_runs=3, fresh_process=True))
    assert r.status.value == "ok", r.message
    assert "baseline_is_candidate" not in r.details
    per_draw = r.details["baseline_samples_s"]  # the draws differ in rows, so in the seed's time
    assert len(per_draw) == 3 and len(set(per_draw)) > 1
    assert r.baseline_time_s == sorted(per_draw)[1]
    # the simulator is deterministic: the same kernel on the same draw takes the same time
    assert r.speedups["baseline"] == pytest.approx(1.0, abs=1e-9)
    assert r.fitness == r.speedups["baseline"]


@pytest.mark.slow
def test_a_fixed_shape_seed_is_simulated_once_per_process(tmp_path, seed_runs) -> None:  # noqa: ANN001
    from kegen.eval import EvalConfig, evaluate

    p = find_suite("default").select(["softmax"]).problems[0]
    seed = tmp_path / "seed.py"
    seed.write_text(p.seed_path.read_text())
    cfg = EvalConfig(target="mtia", trials=2, timing_runs=3)
    for copy in range(2):  # two candidates, each timed on three fresh draws of the same shapes
        r = evaluate(p.problem_path, p.seed_path.read_text() + f"\n# copy {copy}\n", baseline=seed, config=cfg)
        assert r.status.value == "ok", r.message
        assert "baseline_samples_s" not in r.details  # one fingerprint: one time for every sample
        assert r.speedups["baseline"] == pytest.approx(1.0, abs=1e-9)
    assert seed_runs == [1]  # the seed ran on one draw, for both candidates


@pytest.mark.slow
def test_a_runs_timing_seed_times_every_candidate_on_the_same_draws(tmp_path, seed_runs) -> None:  # noqa: ANN001
    from kegen.eval import EvalConfig, evaluate

    path, seed = small_jagged(tmp_path)
    cfg = EvalConfig(target="mtia", trials=2, timing_runs=3, extra={"timing_seed": 12345})
    results = []
    for copy in range(2):  # two candidates of one run
        r = evaluate(path, seed.read_text() + f"\n# copy {copy}\n", baseline=seed, config=cfg)
        assert r.status.value == "ok", r.message
        results.append(r)
    a, b = (r.details["roofline_samples_s"] for r in results)  # the draws differ from each other ...
    assert len(set(a)) > 1 and a == b  # ... but both candidates were timed on the same three
    assert results[0].candidate_time_s == results[1].candidate_time_s  # same kernel, same draws
    assert results[0].details["breakdown"]["calls"]["timed"] == 3  # trials stay on fresh draws
    assert seed_runs == [3]  # the seed ran once per draw, for both candidates
    assert all(r.speedups["baseline"] == pytest.approx(1.0, abs=1e-9) for r in results)


@pytest.mark.slow
def test_a_fixed_shape_problem_times_its_trial_calls_under_a_timing_seed(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    p = find_suite("default").select(["softmax"]).problems[0]
    r = evaluate(p.problem_path, p.seed_path.read_text(),
                 config=EvalConfig(target="mtia", trials=3, timing_runs=3, extra={"timing_seed": 7}))
    assert r.status.value == "ok", r.message
    assert r.details["breakdown"]["calls"].get("timed", 0) == 0  # every draw has the trials' fingerprint
    assert r.details["breakdown"]["calls"]["trial"] == 3


def test_a_search_root_is_its_own_baseline_on_a_fixed_shape_problem(tmp_path) -> None:  # noqa: ANN001
    """The root of a search is evaluated with itself as the baseline: its samples are the seed's
    times, one per fingerprint (three samples of one fixed shape give one)."""
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    p = find_suite("default").select(["softmax"]).problems[0]
    seed = tmp_path / "seed.py"
    seed.write_text(p.seed_path.read_text())
    r = evaluate(p.problem_path, seed.read_text(), baseline=seed,
                 config=EvalConfig(target="mtia", trials=3, timing_runs=3, extra={"timing_seed": 3}))
    assert r.status.value == "ok", r.message
    assert "baseline_error" not in r.details, r.details.get("baseline_error")
    assert r.details["baseline_is_candidate"] is True
    assert r.speedups["baseline"] == 1.0 and r.baseline_time_s == r.candidate_time_s


def test_kegen_eval_takes_a_timing_seed_beside_reproducible_seeds() -> None:
    import argparse

    from kegen.eval.cli_common import add_common_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    cfg = config_from_args(parser.parse_args(["p.py", "c.py", "--timing-seed", "42", "--seed", "1"]))
    assert cfg.extra == {"reproducible": True, "timing_seed": 42}
    assert "timing_seed" not in config_from_args(parser.parse_args(["p.py", "c.py"])).extra
