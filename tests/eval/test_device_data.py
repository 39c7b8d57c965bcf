"""eval v2 on mtia: the candidate's process holds device tensors, never the data (docs/THREAT_MODEL.md).

Every way of getting at the data in the worker (host compute, .item()/.numpy()/.tolist()/.cpu(),
raw pointers, value tables for selection problems, tiny outputs, bit-flipped or laundered host
results, host outputs) gets a non-ok verdict; honest candidates keep their simulated times
exactly; device copies, fills and uploads are charged.
"""

from __future__ import annotations

import pytest
import torch
from eval_helpers import candidate, needs_mtia, problem, quick, run_eval

from kegen.eval import Status

pytestmark = needs_mtia()

HOSTILE = {  # fixture -> (problem, expected status, fragment of the message)
    "hostile_value_table": ("row_max", Status.CHEAT_DETECTED, "aten.max.dim on device data"),
    "hostile_int_smuggle": ("vector_add", Status.CHEAT_DETECTED, "numpy.asarray(tensor)"),
    "hostile_launder": ("vector_add", Status.CHEAT_DETECTED, "Tensor.tolist()"),
    "hostile_fill_bless": ("vector_add", Status.CHEAT_DETECTED, "aten.add.Tensor on device data"),
    "hostile_small_output": ("mse_loss", Status.RUNTIME_ERROR, "SIGSEGV"),  # its pointers reach nothing
    "hostile_bit_flip": ("vector_add", Status.CHEAT_DETECTED, "Tensor.numpy()"),
    "hostile_host_output": ("vector_add", Status.RUNTIME_ERROR, "is a host tensor"),
}


@pytest.mark.parametrize("fixture", sorted(HOSTILE))
def test_reaching_for_the_data_in_the_worker_fails(fixture: str) -> None:
    prob, status, fragment = HOSTILE[fixture]
    r = run_eval(prob, fixture, quick("mtia"))
    assert r.status is status and fragment in r.message, (r.status, r.message)
    assert r.fitness == 0.0 and r.candidate_time_s is None and not r.speedups


def test_host_compute_names_the_op_and_the_candidates_line() -> None:
    r = run_eval("vector_add", "hostile_fill_bless", quick("mtia"))
    assert "write it as a Triton kernel" in r.message
    assert r.source_line is not None and r.source_line.startswith("hostile_fill_bless.py:")
    lines = candidate("hostile_fill_bless").read_text().splitlines()
    assert "a + b" in lines[int(r.source_line.split(":")[1]) - 1]


def _local_seconds(prob: str, cand: str) -> float:
    """The candidate's forward run in this process on the in-process simulator: its launches' time."""
    import importlib.util

    from lowering.backend import driver

    def load(path: object, name: str) -> object:
        spec = importlib.util.spec_from_file_location(name, path)  # type: ignore[arg-type]
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        return mod

    p, c = load(problem(prob), "p_local"), load(candidate(cand), "c_local")
    model = c.ModelNew(*p.get_init_inputs())  # type: ignore[attr-defined]
    driver.clear_launch_history()
    model(*p.get_inputs())  # type: ignore[attr-defined]
    return sum(float(rec.result.seconds) for rec in driver.launch_history())


@pytest.mark.parametrize("prob, cand", [("vector_add", "vector_add_ok"), ("row_max", "row_max_ok")])
def test_honest_candidates_keep_their_simulated_time_exactly(prob: str, cand: str) -> None:
    r = run_eval(prob, cand, quick("mtia", timing_runs=2))
    assert r.status is Status.OK, r.message
    assert r.candidate_time_s == _local_seconds(prob, cand)  # the same launches, the same simulator


def test_device_copies_fills_and_uploads_work_and_are_charged() -> None:
    r = run_eval("vector_add", "vector_add_device_ops", quick("mtia"))
    assert r.status is Status.OK, r.message
    launches_only = _local_seconds("vector_add", "vector_add_device_ops")
    moved = r.details["transfers"]
    assert set(moved) == {"copy", "fill", "upload"} and moved["upload"]["bytes"] == 4
    charged = sum(row["seconds"] for row in moved.values())
    assert r.candidate_time_s == pytest.approx(launches_only + charged, rel=1e-12)


@pytest.mark.slow
def test_an_honest_candidate_after_a_hostile_one_gets_its_time_alone() -> None:
    alone = run_eval("vector_add", "vector_add_ok", quick("mtia"))
    for hostile in ("hostile_fill_bless", "hostile_host_output", "vector_add_memory_hog"):
        run_eval("vector_add", hostile, quick("mtia"))
    again = run_eval("vector_add", "vector_add_ok", quick("mtia"))
    assert alone.status is again.status is Status.OK
    assert again.candidate_time_s == alone.candidate_time_s


def test_a_reference_that_needs_host_ops_still_evaluates() -> None:
    r = run_eval("host_reference", "vector_add_ok", quick("mtia"))
    assert r.status is Status.OK, r.message


def test_device_tensors_do_metadata_on_their_own_and_refuse_data() -> None:
    from lowering.backend.device_tensor import DeviceDataError, DeviceStorage, DeviceTensor

    x = DeviceTensor.on_storage(
        DeviceStorage(7, 4 * 48, None, owned=False), [4, 12], [12, 1], 0, torch.float32
    )
    v = x.view(2, 2, 12).permute(2, 0, 1)[3:, 1]
    assert isinstance(v, DeviceTensor) and v.device_handle == 7 and v.shape == (9, 2)
    assert v.stride() == (1, 12) and v.device_byte_offset == (3 + 24) * 4
    assert x.t().expand(2, 12, 4).shape == (2, 12, 4) and x[1:].data_ptr() == x.data_ptr() + 48
    assert "DeviceTensor(shape=(4, 12)" in repr(x) and "DeviceTensor" in f"{x}"
    for attempt in (
        lambda: x + 1,
        lambda: x.sum(),
        lambda: x[0, 0].item(),
        lambda: x.numpy(),
        lambda: x.tolist(),
        lambda: x.untyped_storage(),
        lambda: x[torch.tensor([1])],
    ):
        with pytest.raises(DeviceDataError, match="on device data in the candidate"):
            attempt()
    with pytest.raises(ValueError, match="reaches past"):
        DeviceTensor.on_storage(DeviceStorage(8, 16, None, owned=False), [5], [1], 0, torch.float32)
