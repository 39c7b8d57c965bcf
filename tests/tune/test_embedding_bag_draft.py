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
    """get_inputs reads its own values (issue 25's evolve bug: DataDependentOutputException). Inductor's
    draft fixed the index count at the captured draw and was wrong at every fresh one (8 of 48
    elements, three seeds), so it is refused with the reason (D50) and the template drafts the problem."""
    import pytest

    from kegen.eval import EvalConfig, evaluate
    from kegen.inductor.capture import CaptureError
    from kegen.inductor.draft import draft_from_inductor
    from kegen.search.operators.drafting import draft_seeds

    p = tmp_path / "ebag.py"
    p.write_text(PROBLEM)
    with pytest.raises(CaptureError, match="sizes depend on its own random values"):
        draft_from_inductor(p)
    (draft,), _ = draft_seeds(p)
    assert draft.origin == "template:embedding" and "ModelNew" in draft.source
    forward = draft.source.split("class ModelNew", 1)[1]
    assert "F.embedding_bag" not in forward and "self.bag(" not in forward  # no host library call left
    r = evaluate(str(p), draft.source, config=EvalConfig(target="mtia", seed=2, trials=3))
    assert r.ok, r.message
