"""Rotary position embeddings recognised numerically and drafted as the one-pass template
(drafting/rope.py), each spelling checked on the simulator against its reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

HEAD = """
import torch
import torch.nn as nn


def tables(seq, dim, half=False):
    inv = 1.0 / 10000.0 ** (torch.arange(0, dim, 2).float() / dim)
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = freqs if half else torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def get_init_inputs():
    return []
"""

CASES = {
    # LLaMA-style buffers sliced to the sequence, fp16 upcast, rotate_half as a function
    "buffers_sliced_fp16": """
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        cos, sin = tables(40, 24)
        self.register_buffer("cos_cached", cos.half())
        self.register_buffer("sin_cached", sin.half())

    def forward(self, q):
        s = q.shape[-2]
        cos, sin = self.cos_cached[:s].float(), self.sin_cached[:s].float()
        return (q.float() * cos + rotate_half(q.float()) * sin).to(q.dtype)


def get_inputs():
    return [torch.randn(2, 3, 33, 24, dtype=torch.float16)]
""",
    # Hugging Face: (batch, seq, dim) tables passed in, unsqueezed for the heads
    "hf_inputs_unsqueezed": """
class Model(nn.Module):
    def forward(self, x, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        rot = torch.cat([-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]], dim=-1)
        return x * cos + rot * sin


def get_inputs():
    cos, sin = tables(17, 16)
    return [torch.randn(2, 4, 17, 16), cos.expand(2, 17, 16).clone(), sin.expand(2, 17, 16).clone()]
""",
    # GPT-J: interleaved pairs with half-width tables
    "interleaved_half_tables": """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        cos, sin = tables(21, 32, half=True)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, x):
        c = self.cos.repeat_interleave(2, dim=-1)
        s = self.sin.repeat_interleave(2, dim=-1)
        rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
        return x * c + rot * s


def get_inputs():
    return [torch.randn(3, 21, 32)]
""",
}


def _problem(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + CASES[name])
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_rope_spellings_are_drafted_as_the_template_and_correct(tmp_path, name: str) -> None:
    """Ragged sizes (33 rows of a 40-row table, 12-wide halves in a 16-wide block)."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.source is not None and "rope_kernel" in a.source, a.summary
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=4, trials=2))
    assert r.ok, r.message


def test_other_math_with_cos_is_not_taken_for_rope(tmp_path) -> None:
    """A forward that mentions cos but is no rotary embedding keeps the other drafters."""
    path = tmp_path / "cosine.py"
    path.write_text(
        HEAD
        + """
class Model(nn.Module):
    def forward(self, x, y):
        return x * torch.cos(y) + torch.flip(x, dims=[-1]) * torch.sin(y)


def get_inputs():
    return [torch.randn(4, 16), torch.randn(4, 16)]
"""
    )
    a = analyze(path)
    assert a.source is None or "rope_kernel" not in a.source
