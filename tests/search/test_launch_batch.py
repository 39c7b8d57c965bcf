"""Launch batching (mutations/launch_batch.py): Inductor's per-input copies of a cat as one launch,
checked numerically against PyTorch on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.launch_batch import batch_launches, batch_mutations
from kegen.tune.capture import draft
from kegen.tune.kernels import batch_seed

CAT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, c):
        return torch.cat([a, b, c], dim=1).view(6, 3, 16)


def get_inputs():
    return [torch.randn(6, 16), torch.randn(6, 16), torch.randn(6, 16)]


def get_init_inputs():
    return []
"""

def test_a_cats_copies_become_one_launch(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(CAT)
    seed = draft(problem)
    batched = batch_launches(seed)
    assert batch_seed(seed) == batched and "tl.program_id(1)" in batched
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-5, rtol=1e-5)
    before, after = evaluate(problem, seed, config=cfg), evaluate(problem, batched, config=cfg)
    assert before.status.value == "ok" and after.status.value == "ok", (before.message, after.message)
    assert len(after.profile["launches"]) == 1 < len(before.profile["launches"])
    assert after.candidate_time_s < before.candidate_time_s
    assert [m.name for m in batch_mutations(seed)] == ["batch_launches"]


def test_launches_that_read_what_an_earlier_one_wrote_are_not_batched(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(CAT.replace("[a, b, c]", "[a, b]").replace("(6, 3, 16)", "(6, 2, 16)"))
    seed = draft(problem)
    launches = [ln for ln in seed.splitlines() if "](" in ln]
    assert len(launches) == 2
    first_out = launches[0].split("](", 1)[1].split(",")[1].strip()  # the first copy's output view
    second_in = launches[1].split("](", 1)[1].split(",")[0].strip()
    chained = seed.replace(launches[1], launches[1].replace(second_in + ",", first_out + ",", 1))
    with pytest.raises(MutationError, match="no two launches"):
        batch_launches(chained)  # the second copy reads what the first wrote: they stay two launches
    assert batch_seed(chained) is None
