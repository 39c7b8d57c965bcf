"""kegen tune's launch fusion (kegen/tune/fusion.py): a GEMM group merged with its pointwise consumer,
seeded with the fused kernel, kept only where it beats Inductor's two kernels."""

from __future__ import annotations

import re
from pathlib import Path

from kegen.eval import EvalConfig, evaluate
from kegen.tune.capture import load_model_file, write_variant_problems
from kegen.tune.kernels import plan_variant, settle_fusion

BLOCK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 48)
        self.down = nn.Linear(48, 16)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


def get_inputs():
    return [torch.randn(3, 5, 16)]


def get_init_inputs():
    return []
"""


def test_gemm_groups_merge_with_their_pointwise_consumers(tmp_path: Path) -> None:
    src = tmp_path / "block.py"
    src.write_text(BLOCK)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    merged = [g for g in plan["groups"] if "members" in g]
    # both GEMMs: up + GELU, down + the residual add
    assert [g["members"][0] for g in merged] == ["addmm", "addmm"]
    assert all(g["members"][1].startswith("triton_poi") for g in merged)
    assert "composed_inductor" in plan and plan["composed_inductor"] != plan["composed"]
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    for g in merged:
        fused = Path(g["seed_path"]).read_text()
        assert "_epilogue0" in fused
        res = evaluate(g["problem"], fused, config=cfg)
        assert res.status.value == "ok", res.message
        base = evaluate(g["problem"], Path(g["inductor_path"]).read_text(), config=cfg)
        assert len(res.profile["launches"]) == len(base.profile["launches"]) - 1
    whole = evaluate(problem, plan["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message


def test_a_fused_seed_stays_only_where_it_is_faster(tmp_path: Path) -> None:
    fused, inductor = tmp_path / "f.py", tmp_path / "i.py"
    fused.write_text("# fused\n")
    inductor.write_text("# inductor\n")
    plan = {
        "layout": {},
        "composed": "whole",
        "groups": [
            {"name": "g0_a", "seed_path": str(fused), "inductor_path": str(inductor), "members": ["mm", "p"]},
            {"name": "g1_b", "seed_path": str(fused), "inductor_path": str(inductor), "members": ["mm", "q"]},
        ],
    }

    def prof(a: float, b: float) -> dict:
        return {"kernels": [{"name": "g0_a", "total_s": a}, {"name": "g1_b", "total_s": b}]}

    import kegen.tune.kernels as kernels

    composed_with = []
    real = kernels.compose
    kernels.compose = lambda lay, sources, model, k, *a: composed_with.append(sources) or "recomposed"  # type: ignore[assignment]
    try:
        out = settle_fusion(plan, prof(1.0, 3.0), prof(2.0, 2.0), "m.py", 0)
        # a fused composition that failed (no profile): Inductor's kernels everywhere
        failed = settle_fusion(plan, None, prof(2.0, 2.0), "m.py", 0)
    finally:
        kernels.compose = real
    assert [g["fused"] for g in out["groups"]] == [True, False]
    assert out["groups"][1]["seed_path"] == str(inductor)
    assert composed_with[0] == ["# fused\n", "# inductor\n"] and out["composed"] == "recomposed"
    assert not any(g["fused"] for g in failed["groups"])


def test_merged_drafts_name_their_problem(tmp_path: Path) -> None:
    src = tmp_path / "block.py"
    src.write_text(BLOCK)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    merged = [g for g in plan["groups"] if "members" in g]
    assert merged
    for g in merged:
        for path in (g["inductor_path"], g["seed_path"]):
            assert f"output for {Path(g['problem']).name}" in Path(path).read_text()


INT4_MLP = """import torch
import torch.nn as nn

G = 32


class Int4Linear(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.k, self.n = k, n
        self.register_buffer("qweight", torch.randint(-(2**31), 2**31 - 1, (k // 8, n), dtype=torch.int32))
        self.register_buffer("qzeros", torch.randint(-(2**31), 2**31 - 1, (k // G, n // 8), dtype=torch.int32))
        self.register_buffer("scales", (torch.rand(k // G, n) * 0.02 + 0.001).to(torch.float16))

    def forward(self, x):
        shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=x.device)
        q = ((self.qweight.unsqueeze(1) >> shifts[None, :, None]) & 15).reshape(self.k, self.n)
        z = ((self.qzeros.unsqueeze(2) >> shifts[None, None, :]) & 15).reshape(self.k // G, self.n) + 1
        w = (q - z.repeat_interleave(G, dim=0)).to(torch.float16) * self.scales.repeat_interleave(G, dim=0)
        return x @ w


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = Int4Linear(128, {hidden})
        self.down = Int4Linear({hidden}, 128)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) + x


def get_inputs():
    return [torch.randn(6, 128, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def test_a_gemm_merges_with_the_kernel_that_unpacks_its_weight(tmp_path: Path) -> None:
    """GPTQ-style int4 linears: Inductor writes each float weight in a pointwise kernel from the
    model's buffers, then the GEMM reads it. Each GEMM group takes its unpacking kernel, seeded with
    the packed template (integers read in the GEMM's loop), which is correct on the simulator; the
    ReLU and the residual add stay their own groups (weights of 256 KiB as floats: the write and read
    back Inductor's unpacking costs outweigh an epilogue launch)."""
    src = tmp_path / "int4_mlp.py"
    src.write_text(INT4_MLP.replace("{hidden}", "1024"))
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    packed = [g for g in plan["groups"] if g["kernel"] == "mm_packed"]
    assert len(packed) == 2, [g["kernel"] for g in plan["groups"]]
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-2, rtol=1e-2)
    for g in packed:
        assert g["members"][0].startswith("triton_poi") and g["members"][1] == "mm"
        assert "weight's integers in the GEMM's loop" in g["change"]
        seed = Path(g["seed_path"]).read_text()
        assert "packed_linear_kernel" in seed and "rn // 8" in seed  # GPTQ's zeros unpacked in the kernel
        res = evaluate(g["problem"], seed, config=cfg)
        assert res.status.value == "ok", res.message
        assert len(res.profile["launches"]) == 1
    whole = evaluate(problem, plan["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message


def test_weights_computed_from_an_input_are_not_merged(tmp_path: Path) -> None:
    """A weight that depends on the model's input is not a model constant: the GEMM keeps its own
    group (the unpacking merge is for parameters and buffers only)."""
    src = tmp_path / "scaled.py"
    src.write_text(
        INT4_MLP.replace("{hidden}", "1024")
        .replace("* self.scales.repeat_interleave(G, dim=0)", "* x.mean()")
        .replace("self.down(torch.relu(self.up(x))) + x", "self.up(x)")
    )
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    assert not [g for g in plan["groups"] if g["kernel"] == "mm_packed"]


def test_small_unpacked_weights_keep_the_epilogue_fusion(tmp_path: Path) -> None:
    """Weights of 16 KiB as floats: writing and reading them back costs less than the launch an
    epilogue fusion saves, so each GEMM takes its consumer (ReLU, the residual add) instead."""
    src = tmp_path / "int4_small.py"
    src.write_text(INT4_MLP.replace("{hidden}", "64"))
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    kernels = [g["kernel"] for g in plan["groups"]]
    assert "mm_packed" not in kernels and sum(k.startswith("mm_triton_poi") for k in kernels) == 2, kernels


GATED = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(32)
        self.gate = nn.Linear(32, 48, bias=False)
        self.up = nn.Linear(32, 48, bias=False)
        self.down = nn.Linear(48, 32, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def get_inputs():
    return [torch.randn(2, 7, 32)]


def get_init_inputs():
    return []
"""


def test_a_gated_mlps_two_gemms_and_activation_are_one_group(tmp_path: Path) -> None:
    """Llama's feed-forward: the gate and up projections of one normalised activation and the
    `silu(gate) * up` Inductor computes after them become one group, seeded with both products in one
    kernel (D83), correct on the simulator with one launch where Inductor's group has three."""
    src = tmp_path / "gated.py"
    src.write_text(GATED)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    (gated,) = [g for g in plan["groups"] if g["kernel"] == "mm_mm_gated"]
    assert gated["members"][:2] == ["mm", "mm"] and gated["members"][2].startswith("triton_poi")
    assert "both products of one input in one kernel" in gated["change"]
    seed = Path(gated["seed_path"]).read_text()
    assert "gacc += tl.dot(a, g)" in seed
    # the normalised activation, reshaped once per projection in Inductor's graph, is one input
    # (`partition.merge_duplicate_outputs`): the activation and the two weights
    forward = re.search(r"def forward\(self, ([^)]*)\)", Path(gated["problem"]).read_text())
    assert forward is not None and len(forward.group(1).split(", ")) == 3, forward
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    res = evaluate(gated["problem"], seed, config=cfg)
    assert res.status.value == "ok", res.message
    base = evaluate(gated["problem"], Path(gated["inductor_path"]).read_text(), config=cfg)
    assert (len(res.profile["launches"]), len(base.profile["launches"])) == (1, 3)
    whole = evaluate(problem, plan["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message
