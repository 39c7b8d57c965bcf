"""Top-k routing recognised by what the reference computes and drafted as the one-pass template
(drafting/router.py), checked on the simulator and in Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia
from tests.search.interp_check import assert_matches_in_interpreter
from tests.triton_interpreter import runs_gpu_templates

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__(){init}

    def forward(self, logits):
{body}


def get_inputs():
    return [torch.randn({shape}, dtype={dtype})]


def get_init_inputs():
    return []
"""

CASES = {
    # name: (forward body, input shape, dtype)
    # softmax over 60 experts, the top-2 weights renormalised (the rows do not fill the last program)
    "softmax_top2_renormalised": (
        "        w, _ = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1)\n"
        "        return w / w.sum(dim=-1, keepdim=True)",
        "300, 60",
        "torch.float32",
    ),
    # Mixtral: top-2 of the logits, softmax over those two, with the experts chosen
    "mixtral_topk_then_softmax": (
        "        w, idx = logits.topk(2, dim=-1)\n        return F.softmax(w, dim=-1), idx",
        "4, 33, 8",
        "torch.float32",
    ),
    # plain top-4 values and positions of the raw scores (a named tuple)
    "plain_top4": ("        return torch.topk(logits, 4)", "96, 128", "torch.float32"),
    # the chosen experts only
    "indices_only": (
        "        return torch.topk(logits.softmax(-1), 3, dim=-1).indices",
        "64, 16",
        "torch.float32",
    ),
    # fp16 probabilities of the top-1 expert (Switch Transformer)
    "switch_top1_fp16": (
        "        return logits.softmax(-1).topk(1, dim=-1).values",
        "128, 32",
        "torch.float16",
    ),
}

# rows wider than one pass (a vocabulary's logits): the chunked kernel, 1024 columns or more at a time
CHUNKED = {
    # sampling's filter: the top 20 probabilities of 3000 tokens and their ids (a partial last chunk)
    "vocab_softmax_top20": (
        "        return torch.topk(torch.softmax(logits, dim=-1), 20, dim=-1)",
        "5, 3000",
        "torch.float32",
    ),
    # top-8 logits of 2100, softmax over those (RENORM), with their ids
    "vocab_top8_then_softmax": (
        "        w, idx = logits.topk(8, dim=-1)\n        return F.softmax(w, dim=-1), idx",
        "3, 2, 2100",
        "torch.float32",
    ),
    # the top 16 probabilities alone (one output: the interpreter check's form)
    "vocab_probs_top16": (
        "        return torch.topk(torch.softmax(logits, -1), 16, dim=-1).values",
        "3, 2100",
        "torch.float32",
    ),
    # many rows, one split each: a row in one chunk wider than CHUNK (4096 for 2100 columns)
    "vocab_rows_top10_one_chunk": (
        "        return torch.topk(torch.softmax(logits, dim=-1), 10, dim=-1)",
        "40, 2100",
        "torch.float32",
    ),
    # one split a row in two chunks of 4096 (the second partial): the second chunk's values replace
    # the list's worst, then the K are sorted
    "vocab_rows_top8_two_chunks": (
        "        return torch.topk(logits, 8, dim=-1)",
        "40, 6000",
        "torch.float32",
    ),
    # two splits a row of one 2048-column chunk each, the second partial
    "vocab_split_top16_wide_chunks": (
        "        return torch.topk(logits, 16, dim=-1)",
        "32, 2600",
        "torch.float32",
    ),
    # fp16 probabilities alone, 40 of 1500
    "vocab_top40_fp16": (
        "        return logits.softmax(-1).topk(40, dim=-1).values",
        "4, 1500",
        "torch.float16",
    ),
}


def _problem(tmp_path: Path, name: str, init: str = "") -> Path:
    body, shape, dtype = CASES[name] if name in CASES else CHUNKED[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(body=body, shape=shape, dtype=dtype, init=init))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_top_k_routers_are_drafted_and_correct(tmp_path, name: str) -> None:
    assert_draft_correct_on_mtia(_problem(tmp_path, name), "reduction", "topk_router_kernel")


@needs_mtia
@pytest.mark.parametrize("name", sorted(CHUNKED))
def test_vocabulary_wide_top_k_is_drafted_in_chunks_and_correct(tmp_path, name: str) -> None:
    assert_draft_correct_on_mtia(_problem(tmp_path, name), "reduction", "topk_chunked_kernel[")


@runs_gpu_templates
def test_the_chunked_top_k_is_exact_in_tritons_interpreter(tmp_path) -> None:
    problem = _problem(tmp_path, "vocab_probs_top16")
    a = analyze(problem)
    assert a.source is not None and "topk_chunked_kernel[" in a.source
    assert_matches_in_interpreter(problem, a.source, tmp_path, "1e-7")


def test_the_mode_is_read_from_the_output(tmp_path) -> None:
    src = analyze(_problem(tmp_path, "mixtral_topk_then_softmax")).source
    assert src is not None and "SOFTMAX=True, RENORM=True" in src  # softmax of the k logits
    assert "return values.view(*x.shape[:-1], 2), indices.view(*x.shape[:-1], 2)" in src
    src = analyze(_problem(tmp_path, "plain_top4")).source
    assert src is not None and "SOFTMAX=False, RENORM=False" in src


@runs_gpu_templates
def test_the_router_is_exact_in_tritons_interpreter(tmp_path) -> None:
    problem = _problem(tmp_path, "softmax_top2_renormalised")
    a = analyze(problem)
    assert a.source is not None
    assert_matches_in_interpreter(problem, a.source, tmp_path, "0")


@pytest.mark.parametrize(
    "body, init",
    [
        # a learned gate before the top-k: a GEMM, not this template's
        ("        return torch.topk(self.gate(logits), 2).values", "\n        self.gate = nn.Linear(32, 8)"),
        # top-k along the rows' dim, not the last
        ("        return torch.topk(logits, 2, dim=0).values", ""),
        # the smallest values
        ("        return torch.topk(logits, 2, largest=False).values", ""),
        # positions of fp16 scores: ties, whose order is torch's implementation's
        ("        return torch.topk(logits.half(), 2).indices", ""),
    ],
)
def test_other_top_k_uses_are_not_taken(tmp_path, body: str, init: str) -> None:
    path = tmp_path / "p.py"
    path.write_text(PROBLEM.format(body=body, shape="64, 32", dtype="torch.float32", init=init))
    a = analyze(path)
    assert a.source is None or "topk_router_kernel" not in a.source
