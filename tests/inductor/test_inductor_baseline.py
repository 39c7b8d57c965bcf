"""The compile baseline: torch.compile on mtia, simulated time, per-kernel records, host ops."""

from __future__ import annotations

import pytest
from inductor_helpers import write_problem

from kegen.inductor.baseline import compile_baseline


@pytest.mark.slow
def test_compile_baseline_times_every_kernel_and_names_host_ops(tmp_path) -> None:
    p = write_problem(
        tmp_path,
        "lin",
        "self.fc = nn.Linear(16, 8)",
        "return torch.sigmoid(self.fc(x))",
        "[torch.randn(4, 16)]",
    )
    b = compile_baseline(p, machine="mtia-2i")
    assert b.complete and b.seconds > 0 and b.max_abs_error < 1e-4
    assert b.seconds == sum(k.seconds for k in b.kernels)
    d = b.to_dict()
    assert d["kernels"][0]["kernel"] == "kegen_matmul_kernel" and "counters" not in d["kernels"][0]

    inv = write_problem(
        tmp_path, "inv", "", "return torch.linalg.inv(x) * 2", "[torch.randn(4, 4) + 4 * torch.eye(4)]"
    )
    b2 = compile_baseline(inv)
    assert not b2.complete and any("linalg_inv" in op for op in b2.host_ops)
