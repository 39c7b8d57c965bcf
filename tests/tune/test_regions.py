"""Regions (kegen/tune/regions.py): an EmbeddingBag's device form cut out of Inductor's kernels as one
group, seeded with the segment-gather template, checked on the simulator against the group's aten ops."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.tune.capture import load_model_file, write_variant_problems
from kegen.tune.kernels import plan_variant
from kegen.tune.regions import origin

BAGS = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.EmbeddingBag(40, 8, mode="mean")
        self.total = nn.Parameter(torch.randn(30, 8))
        self.fc = nn.Linear(16, 4)

    def forward(self, idx, offsets, idx2, offsets2):
        a = self.mean(idx, offsets)
        b = F.embedding_bag(idx2, self.total, offsets2, mode="sum", include_last_offset=True)
        return torch.relu(self.fc(torch.cat([a, b], dim=1)))


def get_inputs():
    return [
        torch.randint(0, 40, (12,)),
        torch.tensor([0, 3, 5, 9]),
        torch.randint(0, 30, (10,)),
        torch.tensor([0, 2, 2, 7, 10]),
    ]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("regions")
    src = tmp / "bags.py"
    src.write_text(BAGS)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp / "problems")
    return problem, plan_variant(mf, problem, 0, tmp / "groups")


def test_each_bag_is_one_group_seeded_with_the_segment_gather(plan: tuple[Path, dict]) -> None:
    problem, p = plan
    bags = [g for g in p["groups"] if g["kernel"] == "embedding_bag"]
    assert len(bags) == 2
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    for g in bags:
        seed = Path(g["seed_path"]).read_text()
        assert "embedding_bag_kernel" in seed and g["seed_path"] != g["inductor_path"]
        assert "LAST=True" in seed or "LAST=False" in seed
        res = evaluate(g["problem"], seed, config=cfg)
        base = evaluate(g["problem"], Path(g["inductor_path"]).read_text(), config=cfg)
        assert res.status.value == "ok" and base.status.value == "ok", (res.message, base.message)
        assert res.candidate_time_s < base.candidate_time_s
    # one bag in each mode the model uses: mean without, sum with include_last_offset
    modes = sorted(
        ("MEAN=True" in Path(g["seed_path"]).read_text(), "LAST=True" in Path(g["seed_path"]).read_text())
        for g in bags
    )
    assert modes == [(False, True), (True, False)]
    whole = evaluate(problem, p["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message


def test_nodes_without_provenance_belong_to_no_region() -> None:
    class Node:
        meta: dict = {}

    assert origin(Node()) is None


ATTENTION = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        full = F.scaled_dot_product_attention(k, q, v)
        return (causal + full).transpose(1, 2).reshape(b, s, 16)


def get_inputs():
    return [torch.randn(2, 12, 16)]


def get_init_inputs():
    return []
"""


def test_attention_is_one_kernel_on_the_qkv_views(tmp_path: Path) -> None:
    src = tmp_path / "attn.py"
    src.write_text(ATTENTION)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    p = plan_variant(mf, problem, 0, tmp_path / "groups")
    regions = [g for g in p["groups"] if g["kernel"] == "scaled_dot_product_attention"]
    assert len(regions) == 2
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    causal = []
    for g in regions:
        seed = Path(g["seed_path"]).read_text()
        assert "kegen_attention_kernel" in seed and ".contiguous()" not in seed
        causal.append("CAUSAL=True" in seed)
        res = evaluate(g["problem"], seed, config=cfg)
        assert res.status.value == "ok", res.message
    assert sorted(causal) == [False, True]
    whole = evaluate(problem, p["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message


def test_the_copy_after_attention_is_written_by_the_attention_kernel(tmp_path: Path) -> None:
    src = tmp_path / "attn.py"
    src.write_text(
        ATTENTION.replace(
            "        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
            "        full = F.scaled_dot_product_attention(k, q, v)\n"
            "        return (causal + full).transpose(1, 2).reshape(b, s, 16)",
            "        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, 16))",
        ).replace(
            "self.qkv = nn.Linear(16, 48)",
            "self.qkv = nn.Linear(16, 48)\n        self.proj = nn.Linear(16, 16)",
        )
    )
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    p = plan_variant(mf, problem, 0, tmp_path / "groups")
    (region,) = [g for g in p["groups"] if g["kernel"] == "scaled_dot_product_attention"]
    assert not any("clone" in g["kernel"] for g in p["groups"])  # the transpose copy went into it
    seed = Path(region["seed_path"]).read_text()
    assert "return torch.as_strided(o, (24, 16), (16, 1), 0)" in seed  # [b*s, 16] rows: the copy's layout
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    res = evaluate(region["problem"], seed, config=cfg)
    assert res.status.value == "ok", res.message
    whole = evaluate(problem, p["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message


MASKED = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
        h = a.transpose(1, 2).reshape(b, s, 16)
        y = self.out(h)
        return y + torch.relu(y) * h


def get_inputs():
    return [torch.randn(2, 12, 16), torch.randn(12, 12)]


def get_input_variants():
    return [[torch.randn(3, 8, 16), torch.randn(8, 8)]]


def get_init_inputs():
    return []
"""


def test_attention_with_an_additive_mask_a_scale_and_two_readers_of_its_output(tmp_path: Path) -> None:
    src = tmp_path / "masked.py"
    src.write_text(MASKED)
    mf = load_model_file(src)
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    for k, problem in enumerate(write_variant_problems(mf, tmp_path / "problems")):
        p = plan_variant(mf, problem, k, tmp_path / "groups")
        (region,) = [g for g in p["groups"] if g["kernel"] == "scaled_dot_product_attention"]
        seed = Path(region["seed_path"]).read_text()
        assert "MASK=True" in seed and "0.3" in seed
        res = evaluate(region["problem"], seed, config=cfg)
        assert res.status.value == "ok", res.message
        whole = evaluate(problem, p["composed"], config=cfg)
        assert whole.status.value == "ok", whole.message


WEIGHTED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(40, 8, mode="sum")
        self.fc = nn.Linear(8, 4)

    def forward(self, idx, offsets, weights):
        return torch.relu(self.fc(self.bag(idx, offsets, per_sample_weights=weights)))


def get_inputs():
    return [torch.randint(0, 40, (12,)), torch.tensor([0, 3, 5, 9]), torch.rand(12)]


def get_init_inputs():
    return []
"""


def test_a_weighted_bag_is_seeded_with_its_weights(tmp_path: Path) -> None:
    src = tmp_path / "weighted.py"
    src.write_text(WEIGHTED)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    p = plan_variant(mf, problem, 0, tmp_path / "groups")
    (g,) = [g for g in p["groups"] if g["kernel"] == "embedding_bag"]
    seed = Path(g["seed_path"]).read_text()
    assert "psw_ptr" in seed and "MEAN=False" in seed
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    res = evaluate(g["problem"], seed, config=cfg)
    assert res.status.value == "ok", res.message


GQA = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.kv = nn.Linear(16, 8)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 4, 4).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, 1, 4).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return a.transpose(1, 2).reshape(b, s, 16)


def get_inputs():
    return [torch.randn(2, 12, 16)]


def get_init_inputs():
    return []
"""


def test_grouped_query_attention_reads_the_shared_kv_heads(tmp_path: Path) -> None:
    src = tmp_path / "gqa.py"
    src.write_text(GQA)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    p = plan_variant(mf, problem, 0, tmp_path / "groups")
    (region,) = [g for g in p["groups"] if g["kernel"] == "scaled_dot_product_attention"]
    seed = Path(region["seed_path"]).read_text()
    assert "GROUP=group" in seed and "CAUSAL=True" in seed  # K/V read once per 4 query heads, not copied
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    res = evaluate(region["problem"], seed, config=cfg)
    assert res.status.value == "ok", res.message
    whole = evaluate(problem, p["composed"], config=cfg)
    assert whole.status.value == "ok", whole.message
