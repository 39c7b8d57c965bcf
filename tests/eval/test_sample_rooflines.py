"""On mtia each timed sample is measured against the roofline of its own inputs.

A jagged problem's draws differ in rows (so in compulsory bytes): a roofline from another draw than
the timed one made a kernel at the DRAM's limit read 95% on one draw and 104% on the next, and could
trip the impossible-speed check with an honest kernel. The evaluator now keeps each timed sample's
inputs, memoises the roofline per input fingerprint (shapes, and integer contents: offsets and
indices) and reports the median of the per-sample fractions.
"""

from __future__ import annotations

import pytest
import torch
from eval_helpers import small_jagged

from kegen.eval.trusted.memo import input_fingerprint


def test_the_fingerprint_reads_integer_contents_and_float_shapes_only() -> None:
    a = [torch.zeros(4, 3), torch.tensor([0, 2, 5])]
    b = [torch.ones(4, 3), torch.tensor([0, 2, 5])]
    c = [torch.zeros(4, 3), torch.tensor([0, 3, 5])]
    d = [torch.zeros(5, 3), torch.tensor([0, 2, 5])]
    assert input_fingerprint(a) == input_fingerprint(b)  # float contents do not move bytes
    assert input_fingerprint(a) != input_fingerprint(c)  # offsets do
    assert input_fingerprint(a) != input_fingerprint(d)  # and so do shapes
    assert input_fingerprint([torch.tensor(True), 3]) == input_fingerprint([torch.tensor(True), 3])


@pytest.mark.slow
def test_a_jagged_problem_gets_one_roofline_per_timed_draw(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    path, seed = small_jagged(tmp_path)
    r = evaluate(path, seed.read_text(),
                 config=EvalConfig(target="mtia", trials=3, timing_runs=3, profile=True, fresh_process=True))
    assert r.status.value == "ok", r.message
    per_draw = r.details["roofline_samples_s"]  # present only when the draws' rooflines differ
    assert len(per_draw) == 3 and len(set(per_draw)) > 1
    assert r.roofline_time_s == sorted(per_draw)[1]
    assert r.speedups["roofline"] == pytest.approx(r.profile["metrics"]["roofline_fraction"])
    assert 0 < r.speedups["roofline"] < 1
