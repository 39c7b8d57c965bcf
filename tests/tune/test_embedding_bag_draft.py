"""The drafter takes EmbeddingBag problems whose get_inputs read values (issue 25's evolve bug)."""

from __future__ import annotations

from pathlib import Path

PROBLEM = """import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(50, 8, mode="mean")
    def forward(self, indices, offsets):
        return self.bag(indices, offsets)
def get_inputs():
    lengths = torch.randint(1, 4, (6,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    return [torch.randint(0, 50, (int(lengths.sum()),)), offsets]
def get_init_inputs():
    return []
"""


def test_embedding_bag_with_offsets_drafts_on_the_device(tmp_path: Path) -> None:
    from kegen.inductor.draft import draft_from_inductor

    p = tmp_path / "ebag.py"
    p.write_text(PROBLEM)
    source, info = draft_from_inductor(p)  # raised DataDependentOutputException before
    assert "embedding_bag" not in source.split("class ModelNew", 1)[1]  # no host library call left
    assert info.kernels and "ModelNew" in source
