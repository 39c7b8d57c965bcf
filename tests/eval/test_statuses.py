"""Every status from a real sandboxed worker: correct, wrong, crashing, hanging and malformed candidates."""

from __future__ import annotations

import pytest
from eval_helpers import candidate, needs_mtia, problem, quick, run_eval

from kegen.eval import ProblemError, Status, evaluate


@needs_mtia()
def test_correct_triton_kernel_is_ok_on_mtia_with_simulated_time_and_roofline() -> None:
    r = run_eval("vector_add", "vector_add_ok", quick("mtia", profile=True, edge_shapes=True))
    assert r.status is Status.OK, r.message
    assert r.max_abs_error == 0.0 and r.trials == 3  # 2 random trials + the precision trial
    assert r.candidate_time_s and r.candidate_time_s > r.roofline_time_s > 0
    assert 0 < r.speedups["roofline"] < 1 and r.fitness == pytest.approx(r.speedups["roofline"])
    assert r.profile["kernels"][0]["name"] == "add_kernel" and r.profile["units"]
    assert r.details["generalises"] == "yes" and r.details["edge_trials"][0]["sizes"] == {"N": 4097}
    assert r.details["timing"]["method"].startswith("simulated by the evaluator's device")


def test_seeds_are_unpredictable_and_fresh_per_call() -> None:
    a = run_eval("vector_add", "vector_add_ok", quick("cpu"))
    b = run_eval("vector_add", "vector_add_ok", quick("cpu"))
    assert a.status is Status.OK and b.status is Status.OK
    # init seed, 2 trials, the precision trial, warm-up + 1 timed call, eager baseline sets
    assert len(set(a.seeds)) == len(a.seeds) >= 6 and not set(a.seeds) & set(b.seeds)
    assert 42 not in a.seeds and a.details["problem_sha256"] == b.details["problem_sha256"]


@needs_mtia()
def test_baseline_is_timed_in_the_same_run_and_gives_the_primary_speedup() -> None:
    r = run_eval("vector_add", "vector_add_ok", quick("mtia"), baseline=candidate("vector_add_launcher"))
    assert r.status is Status.OK, r.message
    assert r.baseline_time_s and r.speedup == pytest.approx(r.baseline_time_s / r.candidate_time_s)
    assert set(r.speedups) == {"baseline", "roofline"}


def test_candidate_given_as_source_text_and_launcher_form_on_cpu() -> None:
    src = candidate("vector_add_launcher").read_text()
    r = evaluate(problem("vector_add"), src, config=quick("cpu"))
    assert r.status is Status.OK, r.message
    assert "eager" in r.speedups and r.fitness == pytest.approx(r.speedups["eager"])


def test_wrong_result_is_incorrect_with_worst_error_and_index() -> None:
    r = run_eval("vector_add", "vector_add_wrong", quick("cpu"))
    assert r.status is Status.INCORRECT and r.fitness == 0.0
    assert "differs at index" in r.message and r.worst_index is not None and r.max_abs_error > 1


def test_shape_specialised_kernel_is_ok_and_edge_shapes_report_that_it_does_not_generalise() -> None:
    r = run_eval("vector_add", "vector_add_fixed_size", quick("cpu"))
    assert r.status is Status.OK, r.message  # judged at the problem's own shapes, as KernelBench does
    assert "generalises" not in r.details
    r = run_eval("vector_add", "vector_add_fixed_size", quick("cpu", edge_shapes=True))
    assert r.status is Status.OK and r.details["generalises"] == "no"
    assert r.details["edge_trials"][0]["sizes"] == {"N": 4097} and not r.details["edge_trials"][0]["ok"]


def test_exception_is_runtime_error_with_the_candidate_line() -> None:
    r = run_eval("vector_add", "vector_add_raises", quick("cpu"))
    assert r.status is Status.RUNTIME_ERROR and "scratch buffer" in r.message
    assert r.source_line == "vector_add_raises.py:9"


def test_segfault_is_runtime_error() -> None:
    r = run_eval("vector_add", "vector_add_segfault", quick("cpu"))
    assert r.status is Status.RUNTIME_ERROR and "SIGSEGV" in r.message


def test_hang_is_timeout() -> None:
    r = run_eval("vector_add", "vector_add_hangs", quick("cpu", timeout_s=6.0))
    assert r.status is Status.TIMEOUT and r.wall_time_s < 15


def test_network_is_blocked() -> None:
    r = run_eval("vector_add", "vector_add_network", quick("cpu"))
    assert r.status is Status.RUNTIME_ERROR
    assert "network" in r.message.lower() or "unreachable" in r.message.lower()
    assert r.details.get("network_isolation") in ("namespace", "python")


SYNTAX_ERROR = (
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b)\n        return a\n"
)


def test_syntax_error_in_source_text_is_compile_error_with_the_line() -> None:
    r = evaluate(problem("vector_add"), SYNTAX_ERROR, config=quick("cpu"))
    assert r.status is Status.COMPILE_ERROR and "syntax error" in r.message
    assert r.source_line == "candidate.py:5"


@pytest.mark.parametrize(
    "name, fragment, line",
    [
        ("import_fails", "kegen_no_such_module", "import_fails.py:2"),
        ("no_model_new", "neither class ModelNew", None),
    ],
)
def test_malformed_candidates_are_compile_errors_that_say_which(
    name: str, fragment: str, line: str | None
) -> None:
    r = run_eval("vector_add", name, quick("cpu"))
    assert r.status is Status.COMPILE_ERROR and fragment in r.message
    assert r.source_line == line


def test_wrong_constructor_signature_is_compile_error() -> None:
    r = run_eval("scale_bias", "scale_bias_wrong_ctor", quick("cpu"))
    assert r.status is Status.COMPILE_ERROR and "constructor" in r.message


def test_plain_torch_candidate_needs_the_allow_list() -> None:
    assert run_eval("scale_bias", "scale_bias_torch", quick("cpu")).status is Status.CHEAT_DETECTED
    r = run_eval("scale_bias", "scale_bias_torch", quick("cpu", allow_ops=("*",)))
    assert r.status is Status.OK, r.message  # same constructor + seeded init = same weights


def test_broken_problem_raises_problem_error() -> None:
    with pytest.raises(ProblemError, match="lacks get_inputs"):
        run_eval("broken_problem", "vector_add_ok", quick("cpu"))


@needs_mtia()
def test_triton_compile_error_on_mtia_points_at_the_kernel_line() -> None:
    r = run_eval("vector_add", "vector_add_compile_error", quick("mtia"))
    assert r.status is Status.COMPILE_ERROR and "no_such_function" in r.message
    assert r.source_line == "vector_add_compile_error.py:12"


@pytest.mark.slow
def test_memory_hog_is_stopped_by_the_memory_limit() -> None:
    r = run_eval("vector_add", "vector_add_memory_hog", quick("cpu", memory_limit_mb=3000))
    assert r.status is Status.RUNTIME_ERROR and "memory" in r.message.lower()


def test_fresh_process_sandbox_gives_the_same_verdict() -> None:
    """A one-off sandbox (its own zygote, closed after the evaluation) for a correct kernel."""
    ok = run_eval("vector_add", "vector_add_ok", quick("cpu", fresh_process=True, trials=1))
    assert ok.status is Status.OK, ok.message


def test_a_chatty_worker_does_not_block_on_its_stderr() -> None:
    r = run_eval("vector_add", "vector_add_chatty", quick("cpu", timeout_s=60))
    assert r.status is Status.OK, r.message


def test_without_bubblewrap_the_evaluation_still_works_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from kegen.eval.trusted import sandbox

    monkeypatch.setattr(sandbox, "_bwrap_ok", sandbox.SandboxKind("none", "bwrap missing (test)"))
    r = run_eval("vector_add", "vector_add_ok", quick("cpu", fresh_process=True, trials=1))
    assert r.status is Status.OK, r.message
    assert r.details["sandbox"] == "none" and r.details["sandbox_warning"] == "bwrap missing (test)"
    assert "warning: bwrap missing (test)" in r.verdict_text()
