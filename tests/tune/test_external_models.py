"""`kegen tune` on models written outside kegen's own models (tests/tune/models/): an embedding
ranking model, a conv net with BatchNorm and pooling, a causal decoder block. Each is captured,
drafted on the device, measured, verified at every variant, and never slower than torch.compile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODELS = Path(__file__).parent / "models"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wide_deep", "conv_net", "causal_lm_block"])
def test_outside_model_tunes_verified_and_never_slower(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kegen.cli import main

    args = [str(MODELS / f"{name}.py"), "--budget", "0", "--out", str(tmp_path / "run"),
            "--library", str(tmp_path / "lib.json"), "--json"]
    assert main(["tune", *args]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["verified"]
    assert summary["variants_checked"] == 2  # the default inputs and get_input_variants()'s one
    machine = summary["machines"]["mtia-2i"]
    assert machine["compile_s"] > 0 and machine["tuned_s"] > 0
    assert summary["speedup_vs_compile"] >= 1.0  # budget 0: Inductor's kernels, timed like compile's
    assert summary["kernels"] and all(k["seed_time_s"] > 0 for k in summary["kernels"])
    assert sum(k["share"] for k in summary["kernels"]) == pytest.approx(1.0, abs=0.02)
