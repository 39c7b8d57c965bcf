"""The EmbeddingBag device form (kegen/inductor/host_ops.py) against torch's own, every mode it covers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kegen.inductor.host_ops import embedding_bag

MODES = {"sum": 0, "mean": 1, "max": 2}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_device_form_matches_torch(mode: str, last: bool, padding_idx: int | None) -> None:
    torch.manual_seed(0)
    weight = torch.randn(10, 5)
    idx = torch.tensor([3, 1, 3, 7, 2, 3, 9, 0, 4])
    offsets = torch.tensor([0, 2, 2, 5, 9] if last else [0, 2, 2, 5, 8])  # an empty bag, one all padding
    want = F.embedding_bag(idx, weight, offsets, mode=mode, include_last_offset=last, padding_idx=padding_idx)
    got = embedding_bag(
        weight, idx, offsets, mode=MODES[mode], include_last_offset=last,
        padding_idx=-1 if padding_idx is None else padding_idx,
    )[0]  # fmt: skip
    torch.testing.assert_close(got, want)


def test_per_sample_weights_scale_the_rows_of_a_sum() -> None:
    weight, idx, offsets = torch.randn(6, 3), torch.tensor([0, 5, 2, 2]), torch.tensor([0, 1, 3])
    psw = torch.rand(4)
    want = F.embedding_bag(idx, weight, offsets, mode="sum", per_sample_weights=psw)
    torch.testing.assert_close(embedding_bag(weight, idx, offsets, mode=0, per_sample_weights=psw)[0], want)


def test_forms_it_does_not_cover_are_left_to_inductor() -> None:
    weight, idx = torch.randn(6, 3), torch.tensor([[0, 1], [2, 3]])
    assert embedding_bag(weight, idx, torch.tensor([0, 1])) is NotImplemented  # 2-D indices
    psw = torch.rand(2)
    assert embedding_bag(weight, idx[0], torch.tensor([0]), mode=1, per_sample_weights=psw) is NotImplemented
