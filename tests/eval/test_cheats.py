"""Today's hostile fixtures under the trusted evaluator: each fails (mostly cheat_detected), honest
kernels are never flagged, and patching timers changes nothing.

Every cheat runs on mtia (the simulated chip) and on cpu (Triton's interpreter), except the roofline
cheat (needs a machine with a roofline: mtia) and the side-stream cheat (needs a GPU: test_gpu.py).
"""

from __future__ import annotations

import pytest
from eval_helpers import needs_mtia, quick, run_eval

from kegen.eval import Status

TARGETS = [pytest.param("mtia", marks=needs_mtia()), "cpu"]

# fixture -> words the cheat_detected verdict must contain
CHEATS = {
    "cheat_cached": "cached result",  # computes once, returns the cached output
    "cheat_mutates_input": "modified input 1",  # scribbles over an input
    "cheat_skips_work": "skips work",  # correct while checked, partial work when timed
    "cheat_library_op": "aten.add",  # torch.add instead of a kernel
    "cheat_low_precision": "lowered the precision",  # fp16 math behind a float32 output
    "cheat_thread": "thread",  # returns at once, computes on a thread
    "cheat_host_compute": "Tensor.numpy",  # numpy on the host + a token kernel
}
# The reference runs only in the evaluator: there is nothing to steal in the worker.
REFERENCE_THIEVES = ("cheat_reference_output", "cheat_calls_reference")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fixture", sorted(CHEATS))
def test_cheat_is_detected(fixture: str, target: str) -> None:
    # Loose tolerances, so that only the cheat checks (not plain correctness) can catch the fixture;
    # five timed calls, so that work skipped on later calls happens on a timed (verified) call.
    r = run_eval("vector_add", fixture, quick(target, atol=0.05, rtol=0.05, timing_runs=5))
    assert r.status is Status.CHEAT_DETECTED, (r.status, r.message)
    assert CHEATS[fixture] in r.message
    assert r.fitness == 0.0 and r.candidate_time_s is None


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fixture", REFERENCE_THIEVES)
def test_stealing_the_reference_finds_nothing(fixture: str, target: str) -> None:
    r = run_eval("vector_add", fixture, quick(target))
    assert r.status in (Status.INCORRECT, Status.RUNTIME_ERROR), (r.status, r.message)
    assert r.fitness == 0.0


@needs_mtia()
def test_patched_timers_do_not_change_the_simulated_time() -> None:
    honest = run_eval("vector_add", "vector_add_ok", quick("mtia"))
    patched = run_eval("vector_add", "cheat_patches_timer", quick("mtia"))
    assert honest.status is Status.OK and patched.status is Status.OK, patched.message
    assert patched.candidate_time_s == pytest.approx(honest.candidate_time_s, rel=1e-9)


@needs_mtia()
def test_raw_pointers_reach_no_data_on_mtia() -> None:
    # its raw pointers reach no data on mtia: the tensor's address is on the device, not in the worker
    r = run_eval("vector_add_large", "cheat_beyond_roofline", quick("mtia"))
    assert r.status is Status.RUNTIME_ERROR and "SIGSEGV" in r.message, r.message
    assert r.fitness == 0.0 and r.candidate_time_s is None


def test_cheat_checks_can_be_switched_off() -> None:
    r = run_eval("vector_add", "cheat_library_op", quick("cpu", check_cheats=False))
    assert r.status is Status.OK
