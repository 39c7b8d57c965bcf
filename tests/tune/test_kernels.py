"""Per-kernel tuning: the group problems, the composed wrapper and per-group install (real drafts and
evaluations on the simulated chip, tiny shapes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from kegen.tune import partition
from kegen.tune.capture import load_model_file, shapes_of, write_variant_problems
from kegen.tune.compose import compose, layout, prefixed
from kegen.tune.kernels import _install_variant, group_profile, plan_variant
from kegen.tune.library import KernelLibrary
from kegen.tune.problems import Counter, measure

MODEL = """import torch
import torch.nn.functional as F
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 4)
    def forward(self, x):
        h = self.a(x)
        return self.b(F.gelu(self.ln(h))).transpose(0, 1) + 1.0
def get_inputs():
    return [torch.randn(4, 8)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def cut_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from kegen.inductor.capture import capture

    d = tmp_path_factory.mktemp("kernels")
    (d / "m.py").write_text(MODEL)
    mf = load_model_file(d / "m.py")
    (problem,) = write_variant_problems(mf, d / "problems")
    cap = capture(problem, keep_graph=True)
    values = partition.record_values(cap.post_grad, partition.graph_args(cap, mf.build(0), mf.variants[0]))
    part = partition.cut(cap.post_grad, cap.kernel_nodes, values)
    return {"dir": d, "mf": mf, "problem": problem, "cap": cap, "part": part}


def _load(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "_kegen_test_problem"}
    exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102 - the test's own generated source
    return ns


def test_groups_follow_inductors_kernels(cut_model: dict[str, Any]) -> None:
    part = cut_model["part"]
    kinds = [g.kernel for g in part.groups]
    assert kinds.count("addmm") == 2  # each GEMM is a group of its own
    assert any("layer_norm" in k or "gelu" in k for k in kinds)
    owned = [n for g in part.groups for n in g.nodes]
    assert len(owned) == len(set(owned))  # every node computed once


def test_group_problem_reference_is_the_models_computation(
    cut_model: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each group's Model, on the values the model fed it, returns the values the model computed."""
    part = cut_model["part"]
    monkeypatch.setattr(partition, "JITTER", 0.0)
    for g in part.groups:
        ns = _load(partition.problem_source(part, g, "m.py", 0))
        inputs = ns["get_inputs"]()
        out = ns["Model"]()(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        assert len(outs) == len(g.outputs)
        for name, got in zip(g.outputs, outs, strict=True):
            want = part.values[name]
            assert got.shape == want.shape and got.stride() == want.stride(), name
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    # with the jitter, fresh floats each call, integers and shapes unchanged
    g = part.groups[0]
    monkeypatch.setattr(partition, "JITTER", 0.01)
    ns = _load(partition.problem_source(part, g, "m.py", 0))
    a, b = ns["get_inputs"](), ns["get_inputs"]()
    assert [x.shape for x in a] == [x.shape for x in b]
    assert any(not torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_wrapper_of_the_groups_references_is_the_model(cut_model: dict[str, Any]) -> None:
    """The composed wrapper (glue views, group order, weights) with each group's own reference as its
    candidate computes exactly what the model computes."""
    part, cap, mf = cut_model["part"], cut_model["cap"], cut_model["mf"]
    sources = [
        partition.problem_source(part, g, "m.py", 0).replace("class Model(", "class ModelNew(")
        for g in part.groups
    ]
    ns = _load(compose(layout(part, cap), sources, "m.py", 0))
    torch.manual_seed(0)
    wrapper = ns["ModelNew"]()
    x = torch.randn(4, 8)
    torch.testing.assert_close(wrapper(x), mf.build(0)(x), atol=1e-6, rtol=1e-6)


def test_prefixed_names_do_not_clash() -> None:
    src = "import torch\nK = 3\ndef f(x):\n    return x + K\nclass ModelNew:\n    def forward(self, x):\n        return f(x)\n"
    imports, body = prefixed(src, "g1_")
    assert imports == ["import torch"]
    assert "def g1_f(x)" in body and "return x + g1_K" in body and "class g1_ModelNew" in body
    assert "return g1_f(x)" in body


@pytest.fixture(scope="module")
def plan(cut_model: dict[str, Any]) -> dict[str, Any]:
    return plan_variant(cut_model["mf"], cut_model["problem"], 0, cut_model["dir"] / "problems")


def test_composed_seed_is_correct_and_as_fast_as_the_whole_draft(
    cut_model: dict[str, Any], plan: dict[str, Any], tmp_path: Path
) -> None:
    lib, counter = KernelLibrary(tmp_path / "lib.json"), Counter()
    shapes = shapes_of(cut_model["mf"].variants[0])
    p = cut_model["problem"]
    whole = measure(p, plan["whole"], "mtia", "mtia-2i", lib, counter, "compile", shapes)
    composed = measure(p, plan["composed"], "mtia", "mtia-2i", lib, counter, "composed", shapes)
    assert whole.ok and composed.ok, composed.message
    assert composed.time_s <= whole.time_s * 1.05
    groups = group_profile(composed.profile, plan["groups"])
    assert {k["name"] for k in groups["kernels"]} == {g["name"] for g in plan["groups"]}
    assert sum(k["total_s"] for k in groups["kernels"]) == pytest.approx(
        sum(float(k["total_s"]) for k in composed.profile["kernels"])
    )


class _Opts:
    retune = False


def test_install_keeps_inductors_kernel_when_the_winner_loses(
    cut_model: dict[str, Any], plan: dict[str, Any], tmp_path: Path
) -> None:
    lib, counter = KernelLibrary(tmp_path / "lib.json"), Counter()
    shapes = shapes_of(cut_model["mf"].variants[0])
    p = cut_model["problem"]
    seed = measure(p, plan["whole"], "mtia", "mtia-2i", lib, counter, "compile", shapes).to_dict()
    slower = Path(plan["groups"][0]["seed_path"]).read_text()
    found = {"0/0": {"source": slower, "speedup": 0.8, "change": "slower"}}
    v = _install_variant(
        0, p, plan, found, {"ok": True}, seed, shapes, "mtia", "mtia-2i", _Opts(), lib, counter
    )
    assert v["ok"] and v["winners"] == [] and not v["composed"]
    assert v["source"] == plan["whole"]  # Inductor's kernels stay


def test_a_winner_that_breaks_the_variant_is_uninstalled(
    cut_model: dict[str, Any], plan: dict[str, Any], tmp_path: Path
) -> None:
    lib, counter = KernelLibrary(tmp_path / "lib.json"), Counter()
    shapes = shapes_of(cut_model["mf"].variants[0])
    p = cut_model["problem"]
    seed = measure(p, plan["whole"], "mtia", "mtia-2i", lib, counter, "compile", shapes).to_dict()
    gi = next(i for i, g in enumerate(plan["groups"]) if g["kernel"] != "addmm")
    good = Path(plan["groups"][gi]["seed_path"]).read_text()
    broken, n = re.subn(r"tl\.store\(([^,]+), (\w+)", r"tl.store(\1, \2 + 0.5", good, count=1)
    assert n == 1
    found = {f"0/{gi}": {"source": broken, "speedup": 2.0, "change": "broken"}}
    v = _install_variant(
        0, p, plan, found, {"ok": True}, seed, shapes, "mtia", "mtia-2i", _Opts(), lib, counter
    )
    assert v["ok"] and v["winners"] == []
    assert "uninstalled" in v["uninstalled"] and plan["groups"][gi]["name"] in v["uninstalled"]
    assert "+ 0.5" not in v["source"]
