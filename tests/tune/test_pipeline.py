"""kegen tune end to end on a tiny model (real evaluations on the simulated chip)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kegen.tune.capture import draft, load_model_file, shapes_of, write_variant_problems
from kegen.tune.library import KernelLibrary
from kegen.tune.problems import Counter
from kegen.tune.verify import verify_variant

MLP = """import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 4)
    def forward(self, x):
        return torch.sigmoid(self.l(x))
def get_inputs():
    return [torch.randn(2, 8)]
def get_init_inputs():
    return []
"""


def test_verification_uninstalls_a_broken_kernel(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(MLP)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    inductor = draft(problem)
    broken, n = re.subn(r"tl\.store\(([^,]+), (\w+)", r"tl.store(\1, \2 + 0.5", inductor, count=1)
    assert n == 1
    lib, counter = KernelLibrary(tmp_path / "lib.json"), Counter()
    verdict, kept = verify_variant(
        0, problem, broken, inductor, "mtia", "mtia-2i", lib, counter, shapes_of(mf.variants[0]), seed=123
    )
    assert kept == inductor  # Inductor's kernel stays
    assert verdict.ok and "winner uninstalled at variant 0" in verdict.uninstalled
    assert counter.evaluations == 2


def test_second_run_reuses_the_library_and_json_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kegen.cli import main

    src = tmp_path / "m.py"
    src.write_text(MLP)
    common = [str(src), "--budget", "0", "--library", str(tmp_path / "lib.json"), "--json"]
    assert main(["tune", *common, "--out", str(tmp_path / "r1")]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["status"] == "ok" and first["verified"] and first["variants_checked"] == 1
    assert first["evaluations"] == 3  # torch.compile, eager, verification
    assert first["speedup_vs_compile"] == pytest.approx(1.0)  # budget 0: Inductor's kernels kept
    assert {"name", "share", "seed_time_s", "best_time_s", "speedup", "installed"} <= set(first["kernels"][0])
    assert (tmp_path / "r1" / "report.html").is_file()
    assert main(["tune", *common, "--out", str(tmp_path / "r2")]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["evaluations"] == 0 and second["verified"]
    assert second["machines"]["mtia-2i"]["compile_s"] == first["machines"]["mtia-2i"]["compile_s"]


@pytest.mark.slow
def test_per_kernel_tuning_on_two_machines_then_reuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Budget 1 per machine: the kernel groups are cut, the hot one searched, a table per machine; the
    second run evaluates nothing."""
    from kegen.cli import main

    src = tmp_path / "m.py"
    src.write_text(MLP)
    common = [
        str(src),
        "--budget",
        "1",
        "--machine",
        "mtia-v1,mtia-2i",
        "--library",
        str(tmp_path / "lib.json"),
        "--json",
    ]
    assert main(["tune", *common, "--out", str(tmp_path / "r1")]) == 0
    out = capsys.readouterr().out
    first = json.loads(out.strip().splitlines()[-1])
    assert "== mtia-v1 ==" in out and "== mtia-2i ==" in out
    for name in ("mtia-v1", "mtia-2i"):
        m = first["machines"][name]
        assert m["mode"] == "per-kernel" and m["verified"]
        assert m["speedup_vs_compile"] >= 1.0  # never slower than torch.compile
        assert sum(m["budget"].values()) == 1
        # the searched kernel's problem reports its fraction of the roofline
        fractions = [k["roofline"] for k in m["kernels"] if k["roofline"] is not None]
        assert fractions and all(0.0 < f <= 1.5 for f in fractions)
        assert {k["name"].split("_", 1)[0] for k in m["kernels"]} <= {"g0", "g1", "g2"}
    state = json.loads((tmp_path / "r1" / "state.json").read_text())
    groups = state["plan/0"]["groups"]
    # the linear and its sigmoid: one group, Inductor's two kernels its baseline, the fused one its seed
    assert "error" not in state["plan/0"] and (len(groups) >= 2 or groups[0]["members"][0] == "addmm")
    assert main(["tune", *common, "--out", str(tmp_path / "r2")]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["evaluations"] == 0 and second["verified"]
    assert second["machines"]["mtia-v1"]["tuned_s"] == first["machines"]["mtia-v1"]["tuned_s"]


def test_the_tuned_model_runs_at_its_shapes_and_falls_back_elsewhere(tmp_path: Path) -> None:
    import torch

    import kegen.tune

    src = tmp_path / "m.py"
    src.write_text(MLP)
    report = kegen.tune(
        src, machines=("mtia-2i",), budget=0, out=tmp_path / "r", library=tmp_path / "lib.json"
    )
    tuned = report.tuned["mtia-2i"]
    model = load_model_file(src).build(0)
    for x in (torch.randn(2, 8), torch.randn(5, 8)):  # the tuned variant's shape, then another one
        with torch.no_grad():
            assert torch.allclose(tuned(x), model(x), atol=1e-5, rtol=1e-5)
    assert len(tuned._built) == 1 and tuned._generic is not None
