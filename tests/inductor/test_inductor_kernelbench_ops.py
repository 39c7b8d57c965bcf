"""KernelBench-format problems (module constants, init arguments, several inputs) with the ops the
drafter must cover on every supported torch: LeakyReLU, SELU, BatchNorm2d, LayerNorm, MaxPool2d,
cross-entropy and top-k become correct seeds on mtia (small shapes)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.inductor.draft import draft_from_inductor

CFG = EvalConfig(target="mtia", trials=1, profile=False, timing_runs=1)

# name -> (module-level constants, Model body, get_inputs body, get_init_inputs body)
PROBLEMS: dict[str, tuple[str, str, str, str]] = {
    "leaky_relu": (
        "batch_size = 4\ndim = 96",
        """
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)
""",
        "return [torch.randn(batch_size, dim)]",
        "return [0.2]",
    ),
    "selu": (
        "batch_size = 4\ndim = 96",
        """
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.selu(x)
""",
        "return [torch.randn(batch_size, dim)]",
        "return []",
    ),
    "batch_norm_2d": (
        "batch_size = 2\nfeatures = 4\ndim1 = 6\ndim2 = 5",
        """
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)
""",
        "return [torch.randn(batch_size, features, dim1, dim2)]",
        "return [features]",
    ),
    "layer_norm": (
        "batch_size = 2\nfeatures = 4\ndim1 = 6\ndim2 = 5",
        """
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)
""",
        "return [torch.randn(batch_size, features, dim1, dim2)]",
        "return [(features, dim1, dim2)]",
    ),
    "max_pool_2d": (
        "batch_size = 2\nchannels = 3\nheight = 9\nwidth = 8\nkernel_size = 2\nstride = 2\npadding = 1\n"
        "dilation = 2",
        """
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.maxpool(x)
""",
        "return [torch.randn(batch_size, channels, height, width)]",
        "return [kernel_size, stride, padding, dilation]",
    ),
    "cross_entropy": (
        "batch_size = 8\nnum_classes = 10\ninput_shape = (num_classes,)\ndim = 1",
        """
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)
""",
        "return [torch.randn(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]",
        "return []",
    ),
    # aten.topk is a host library call on Inductor's CPU path: drafted as k rounds of max reductions
    "topk_router": (
        "tokens = 24\nexperts = 9",
        """
    def forward(self, logits):
        weights, chosen = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), chosen
""",
        "return [torch.randn(tokens, experts)]",
        "return []",
    ),
    "topk_smallest_dim0": (
        "rows = 11\ncols = 6",
        """
    def forward(self, x):
        return torch.topk(x, 3, dim=0, largest=False)
""",
        "return [torch.randn(rows, cols)]",
        "return []",
    ),
}


def _write(tmp: Path, name: str) -> Path:
    consts, body, inputs, init = PROBLEMS[name]
    src = (
        "import torch\nimport torch.nn as nn\n\n"
        + consts
        + "\n\n\nclass Model(nn.Module):"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + f"\n\ndef get_inputs():\n    {inputs}\n\n\ndef get_init_inputs():\n    {init}\n"
    )
    path = tmp / f"{name}.py"
    path.write_text(src)
    return path


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_kernelbench_op_is_drafted_into_a_correct_seed(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name)
    source, info = draft_from_inductor(path)
    ast.parse(source)
    assert info.kernels, "the draft launches Inductor's Triton kernels"
    assert "torch._inductor" not in source and "triton_helpers" not in source  # standalone
    # variances as sums on every torch (2.11 lacks the option that turns Welford off: kegen.compat)
    assert "welford" not in source.lower()
    r = evaluate(path, source, config=CFG)
    assert str(getattr(r.status, "value", r.status)) == "ok", r.message


def test_topk_decomposition_matches_torch_and_keeps_indices_distinct() -> None:
    """Values and indices as torch.topk's on distinct values; rows with fewer than k finite values and
    NaNs give torch's values and distinct indices (torch leaves the order of ties unspecified)."""
    import torch

    from kegen.inductor.decompositions import MAX_TOPK, topk

    torch.manual_seed(0)
    for shape, k, dim, largest in [((7, 33), 2, -1, True), ((5, 9, 4), 3, 1, False), ((12,), 5, 0, True)]:
        x = torch.randn(shape)
        assert all(
            torch.equal(a, b) for a, b in zip(topk(x, k, dim, largest), torch.topk(x, k, dim, largest))
        )
    x = torch.full((3, 6), float("-inf"))
    x[0, 2], x[1, 4], x[1, 1] = 1.0, float("nan"), 5.0
    values, indices = topk(x, 3)
    torch.testing.assert_close(values, torch.topk(x, 3).values, equal_nan=True)
    assert all(len(set(row.tolist())) == 3 for row in indices)
    assert topk(x, MAX_TOPK + 1) is NotImplemented  # large k stays a refused library call
