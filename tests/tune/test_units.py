"""kegen tune's parts that need no evaluation: triage, budget, library, install choice, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kegen.tune import TuneOptions, tune_file
from kegen.tune.budget import allocate, expected_gain
from kegen.tune.capture import TuneError, load_model_file, write_variant_problems
from kegen.tune.install import choose, kernel_rows
from kegen.tune.library import KernelLibrary, library_key
from kegen.tune.triage import triage

PROFILE = {
    "time_s": 10.0,
    "kernels": [
        {"name": "small", "calls": 1, "total_s": 0.5},
        {"name": "big", "calls": 2, "total_s": 7.0},
        {"name": "mid", "calls": 1, "total_s": 2.5},
    ],
    "launches": [
        {"kernel": "big", "launch_overhead_s": 0.1},
        {"kernel": "big", "launch_overhead_s": 0.1},
        {"kernel": "mid", "launch_overhead_s": 0.1},
        {"kernel": "small", "launch_overhead_s": 0.1},
    ],
}


def test_triage_hot_set_covers_ninety_percent_and_amdahl_bound() -> None:
    t = triage(PROFILE)
    assert [k.name for k in t.kernels] == ["big", "mid", "small"]
    assert t.hot == ["big", "mid"]  # 70% then 95% >= 90%
    assert t.hot_share == pytest.approx(0.95)
    # hot kernels at their launch-overhead floor (0.2 + 0.1), the cold one unchanged (0.5)
    assert t.amdahl_bound == pytest.approx(10.0 / 0.8)
    assert triage(PROFILE, coverage=0.5).hot == ["big"]
    with pytest.raises(ValueError):
        triage(PROFILE, coverage=0)


def test_budget_follows_expected_gain() -> None:
    assert expected_gain(2.0, 0.5, 0.25) == pytest.approx(0.75)
    assert expected_gain(2.0, 0.5, 1.5) == 0.0
    alloc = allocate(10, {"a": 3.0, "b": 1.0, "c": 0.0})
    assert sum(alloc.values()) == 10 and alloc["c"] == 0 and alloc["a"] > alloc["b"] >= 1
    assert allocate(1, {"a": 1.0, "b": 2.0}) == {"a": 0, "b": 1}
    with pytest.raises(ValueError):
        allocate(-1, {"a": 1.0})


def test_library_keys_and_persistence(tmp_path: Path) -> None:
    k1 = library_key("search", "src", [[[8, 32], "float32"]], "mtia", "mtia-2i")
    assert k1 != library_key("search", "src", [[[8, 32], "float32"]], "mtia", "mtia-300")
    assert k1 != library_key("search", "src2", [[[8, 32], "float32"]], "mtia", "mtia-2i")
    assert k1 != library_key("search", "src", [[[4, 32], "float32"]], "mtia", "mtia-2i")
    lib = KernelLibrary(tmp_path / "lib.json")
    lib.put(k1, {"speedup": 1.5})
    assert KernelLibrary(tmp_path / "lib.json").get(k1) == {"speedup": 1.5}


def test_install_keeps_inductor_unless_faster() -> None:
    assert choose(2.0, 1.0, "src") and not choose(1.0, 1.0, "src") and not choose(1.0, 2.0, "src")
    assert not choose(2.0, 1.0, None)
    seed = [{"kernels": [{"name": "k0", "total_s": 2.0}, {"name": "k1", "total_s": 1.0}]}]
    tuned = [{"kernels": [{"name": "k0", "total_s": 1.0}, {"name": "k1", "total_s": 1.5}]}]
    rows = {r["name"]: r for r in kernel_rows(seed, tuned, {"k0": 0.66}, [True], ["blocks"])}
    assert rows["k0"]["installed"] and rows["k0"]["speedup"] == pytest.approx(2.0)
    assert not rows["k1"]["installed"] and rows["k1"]["change"] == ""
    rows = {r["name"]: r for r in kernel_rows(seed, tuned, {}, [False], ["blocks"])}
    assert not rows["k0"]["installed"]


def test_bad_model_files(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="does not exist"):
        load_model_file(tmp_path / "nope.py")
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(TuneError, match="get_inputs, get_init_inputs"):
        load_model_file(bad)
    bad.write_text(MLP + "\ndef get_input_variants():\n    return torch.randn(3)\n")
    with pytest.raises(TuneError, match="list of input lists"):
        load_model_file(bad)


def test_inputs_whose_sizes_depend_on_their_values_are_refused(tmp_path: Path) -> None:
    """Bags of random lengths: Inductor would bake one call's index count into every kernel."""
    bags = tmp_path / "bags.py"
    bags.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.bag = torch.nn.EmbeddingBag(64, 8, mode='sum')\n"
        "    def forward(self, indices, offsets):\n"
        "        return self.bag(indices, offsets)\n"
        "def get_inputs():\n"
        "    lengths = torch.randint(1, 9, (16,))\n"
        "    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])\n"
        "    return [torch.randint(0, 64, (int(lengths.sum()),)), offsets]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    with pytest.raises(
        TuneError, match=r"get_inputs\(\) gives inputs of other shapes from call to call \(input 0"
    ):
        load_model_file(bags)
    varying = tmp_path / "varying.py"
    varying.write_text(
        MLP + "\ndef get_input_variants():\n    return [[torch.randn(int(torch.randint(3, 99, ())), 8)]]\n"
    )
    with pytest.raises(TuneError, match=r"get_input_variants\(\)\[0\] gives inputs of other shapes"):
        load_model_file(varying)
    fixed = tmp_path / "fixed.py"
    fixed.write_text(MLP + "\ndef get_input_variants():\n    return [[torch.randn(5, 8)]]\n")
    assert [x[0].shape[0] for x in load_model_file(fixed).variants] == [2, 5]


def test_resume_of_a_changed_model_is_refused(tmp_path: Path) -> None:
    from kegen.tune.run import State

    model, run = tmp_path / "m.py", tmp_path / "run"
    model.write_text(MLP)
    run.mkdir()
    State(run / "state.json").put("model_sha256", "0" * 64)  # a run of another model's text
    State(run / "state.json").put("captured", True)
    with pytest.raises(TuneError, match="changed since this run started"):
        tune_file(model, TuneOptions(budget=0, library=tmp_path / "lib.json"), resume=run)


MLP = """import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 4)
    def forward(self, x):
        return torch.relu(self.l(x))
def get_inputs():
    return [torch.randn(2, 8)]
def get_init_inputs():
    return []
"""


def test_variant_problems_serve_each_variant(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(MLP + "def get_input_variants():\n    return [[torch.randn(5, 8)]]\n")
    mf = load_model_file(src)
    paths = write_variant_problems(mf, tmp_path / "problems")
    shapes = []
    for p in paths:
        shapes.append(tuple(load_model_file(p).variants[0][0].shape))
    assert shapes == [(2, 8), (5, 8)]


def test_graph_break_names_the_line(tmp_path: Path) -> None:
    from kegen.tune.capture import check_capturable

    src = tmp_path / "brk.py"
    src.write_text(
        MLP.replace(
            "return torch.relu(self.l(x))",
            "y = self.l(x)\n        print('hi', y.sum().item())\n        return torch.relu(y)",
        )
    )
    with pytest.raises(TuneError, match=r"brk\.py:\d+") as err:
        check_capturable(load_model_file(src))
    assert err.value.kind == "graph_break"


def test_cli_json_last_line_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kegen.cli import main

    assert main(["tune", str(tmp_path / "missing.py"), "--json"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert data["status"] == "bad_input" and data["verified"] is False and data["kernels"] == []
    assert math.isfinite(data["variants_checked"])


def test_gpu_targets_go_through_the_gpu_drafter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import torch

    src = tmp_path / "m.py"
    src.write_text(MLP)
    opts = TuneOptions(target="nvidia", out=tmp_path / "r", library=tmp_path / "lib.json", budget=0)
    if not torch.cuda.is_available():  # the drafter is called: it names the missing device
        with pytest.raises(TuneError, match="CUDA"):
            tune_file(src, opts)
    monkeypatch.setitem(sys.modules, "kegen.tune.gpu", None)  # a tree without the GPU drafter
    with pytest.raises(TuneError, match="kegen.tune.gpu") as missing:
        tune_file(src, opts)
    assert missing.value.kind == "unsupported_target"
    with pytest.raises(TuneError) as other:
        tune_file(src, TuneOptions(target="tpu", out=tmp_path / "r2"))
    assert other.value.kind == "unsupported_target"


def test_report_says_how_each_variant_was_verified() -> None:
    from kegen.tune.report import _checked_by

    compile_own = {"checked_by": "torch.compile itself", "verified": True}
    fresh = {"checked_by": "fresh inputs", "verified": True}
    assert "nothing of kegen's installed" in _checked_by([compile_own, compile_own])
    assert _checked_by([fresh, compile_own]) == (
        "(1 at fresh random inputs, fp32 atol 1e-4 rtol 5e-4; 1 run torch.compile's own module)"
    )
    assert _checked_by([{"verified": True}]) == "(fresh random inputs, fp32 atol 1e-4 rtol 5e-4)"


def test_embedding_bag_max_with_padding_tunes_on_the_device(tmp_path: Path) -> None:
    """A mode kegen's bag template does not cover still runs on the device (kegen's device form)."""
    from kegen.tune import TuneOptions, tune_file

    src = tmp_path / "bagmax.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.bag = nn.EmbeddingBag(50, 8, mode='max', padding_idx=0)\n\n"
        "    def forward(self, idx, off):\n        return self.bag(idx, off)\n\n\n"
        "def get_inputs():\n    return [torch.randint(0, 50, (12,)), torch.tensor([0, 4, 7])]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    s = tune_file(src, TuneOptions(budget=0, out=tmp_path / "run", library=tmp_path / "lib.json")).summary()
    assert s["status"] == "ok" and s["verified"] and s["variants_checked"] == 1
    assert s["machines"]["mtia-2i"]["host_ops"] == []
