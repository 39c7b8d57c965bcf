"""One hostile fixture per known cheat, each caught as cheat_detected; honest kernels are never flagged.

Every cheat runs on mtia (the simulated chip) and on cpu (Triton's interpreter), except the roofline
cheat (needs a machine with a roofline: mtia) and the side-stream cheat (needs a GPU: test_gpu.py).
"""

from __future__ import annotations

import pytest
from eval_helpers import needs_mtia, quick, run_eval

from kegen.eval import Status

TARGETS = [pytest.param("mtia", marks=needs_mtia()), "cpu"]

# fixture -> words the verdict must contain
CHEATS = {
    "cheat_reference_output": "reference",  # returns the reference's buffer (found with gc)
    "cheat_cached": "cached result",  # computes once, returns the cached output
    "cheat_mutates_input": "modified input 1",  # scribbles over an input
    "cheat_skips_work": "skips work",  # correct while checked, partial work when timed
    "cheat_library_op": "aten.add",  # torch.add instead of a kernel
    "cheat_calls_reference": "called the PyTorch reference",
    "cheat_low_precision": "lowered the precision",  # fp16 math behind a float32 output
    "cheat_thread": "thread",  # returns at once, computes on a thread
    "cheat_patches_timer": "monkey-patching timers",  # replaces time.perf_counter / launch history
    "cheat_host_compute": "Tensor.numpy",  # numpy on the host + a token kernel
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fixture", sorted(CHEATS))
def test_cheat_is_detected(fixture: str, target: str) -> None:
    # Loose tolerances, so that only the cheat checks (not plain correctness) can catch the fixture.
    r = run_eval("vector_add", fixture, quick(target, atol=0.05, rtol=0.05))
    assert r.status is Status.CHEAT_DETECTED, (r.status, r.message)
    assert CHEATS[fixture] in r.message
    assert r.fitness == 0.0


@needs_mtia()
def test_speedup_beyond_the_roofline_is_a_cheat_on_mtia() -> None:
    r = run_eval("vector_add_large", "cheat_beyond_roofline", quick("mtia"))
    assert r.status is Status.CHEAT_DETECTED and "below the roofline" in r.message
    assert r.candidate_time_s < r.roofline_time_s


def test_cheat_checks_can_be_switched_off() -> None:
    r = run_eval("vector_add", "cheat_library_op", quick("cpu", check_cheats=False))
    assert r.status is Status.OK
