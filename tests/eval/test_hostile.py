"""One hostile candidate per class of issue 12, written against the old in-process harness.

None may get `ok` or a time: each fails with the status given here (and, where it matters, the
evaluator's own check names what it saw). Classes: 1 forging the worker's output, 2 mutating the
harness's data (and forging time), 3 lying tensor objects, 4 work outside kernels, 5 unverified
timed calls, 6 attacking the machine (test_sandbox.py), 7 off-grid reduced precision.
"""

from __future__ import annotations

import pytest
from eval_helpers import needs_mtia, quick, run_eval

from kegen.eval import Status

# fixture -> (class, expected status, fragment of the message or None)
HOSTILE = {
    "hostile_forge_result": (1, Status.RUNTIME_ERROR, None),
    "hostile_mutates_harness": (2, Status.INCORRECT, "atol 0.0001"),
    "hostile_forge_time": (2, Status.CHEAT_DETECTED, "not written by any kernel"),
    "hostile_disables_guards": (2, Status.CHEAT_DETECTED, "not written by any kernel"),
    "hostile_tensor_subclass": (3, Status.INCORRECT, "differs"),
    "hostile_host_copy_kernel": (4, Status.CHEAT_DETECTED, "host produced during the call"),
    "hostile_thread_joined": (4, Status.CHEAT_DETECTED, "on a thread"),
    "hostile_precomputed": (4, Status.INCORRECT, "differs"),
    "hostile_skips_unverified": (5, Status.CHEAT_DETECTED, "skips work"),
    "hostile_offgrid_precision": (7, Status.INCORRECT, None),
}
# On mtia the worker holds device tensors, never data: every way of reaching the data in the
# worker fails there with the op it tried (docs/THREAT_MODEL.md); the others as on cpu.
ON_DEVICE = (Status.CHEAT_DETECTED, "on device data in the candidate")
MTIA = {
    "hostile_forge_time": ON_DEVICE,  # switches the driver to in-process simulation: no bytes to copy
    "hostile_disables_guards": ON_DEVICE,
    "hostile_host_copy_kernel": ON_DEVICE,
    "hostile_precomputed": ON_DEVICE,
    "hostile_tensor_subclass": (Status.RUNTIME_ERROR, "subclass"),
    "hostile_thread_joined": (Status.RUNTIME_ERROR, None),  # the thread's torch op fails on device data
}
# Without the simulated device (cpu: kernels run in the worker's own interpreter, a development
# target) these have nothing to be caught by.
MTIA_ONLY = {"hostile_forge_time", "hostile_disables_guards", "hostile_host_copy_kernel"}


def _check(fixture: str, target: str) -> None:
    _, status, fragment = HOSTILE[fixture]
    if target == "mtia" and fixture in MTIA:
        status, fragment = MTIA[fixture]
    r = run_eval("vector_add", fixture, quick(target, timing_runs=3))
    assert r.status is status, (r.status, r.message)
    assert fragment is None or fragment in r.message, r.message
    assert r.fitness == 0.0 and r.candidate_time_s is None and not r.speedups


@needs_mtia()
@pytest.mark.parametrize("fixture", sorted(HOSTILE))
def test_hostile_candidate_fails_on_mtia(fixture: str) -> None:
    _check(fixture, "mtia")


@pytest.mark.parametrize("fixture", sorted(set(HOSTILE) - MTIA_ONLY))
def test_hostile_candidate_fails_on_cpu(fixture: str) -> None:
    _check(fixture, "cpu")


@needs_mtia()
def test_precision_trial_catches_bf16_hidden_under_the_absolute_tolerance() -> None:
    r = run_eval("small_add", "hostile_offgrid_small", quick("mtia"))
    assert r.status is Status.INCORRECT and "offset by +16" in r.message, (r.status, r.message)
    assert r.details["precision_trial"] == "failed"
    assert [t["ok"] for t in r.details["trials"]] == [True, True, False]  # unit-scale trials pass
