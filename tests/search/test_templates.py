"""Templates reuse the examples' seeds instead of repeating them (kegen/examples/*/seed.py)."""

from __future__ import annotations

import ast

import pytest

from kegen.search.operators import templates


def _body(name: str) -> str:
    """The example's seed as a template writes it: the file without its docstring."""
    source = (templates.EXAMPLES / name / "seed.py").read_text()
    doc = ast.parse(source).body[0]
    return "".join(source.splitlines(keepends=True)[doc.end_lineno or 0 :]).lstrip("\n")


def test_two_kernel_softmax_is_the_softmax_example_seed() -> None:
    assert templates.softmax("two_kernel", 32) == _body("softmax")
    sized = templates.softmax("two_kernel", 128)
    assert "STATS_BLOCK_SIZE = 128\nNORM_BLOCK_SIZE = 128\n" in sized
    assert sized.replace("= 128", "= 32") == _body("softmax")
    ast.parse(sized)


def test_elementwise_template_writes_the_vector_add_example_seed() -> None:
    assert templates.elementwise(2, ["t0 = (v0 + v1)"], "t0", block=64) == _body("vector_add")


def test_a_constant_the_seed_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="sets no integer BLOCK_SIZE"):
        templates.example_seed("softmax", BLOCK_SIZE=64)


def test_power_of_two_sizes_round_up_or_down_within_their_bounds() -> None:
    assert [templates.pow2_block(n, 16, 1024) for n in (1, 17, 64, 3000)] == [16, 32, 64, 1024]
    assert [templates.pow2_floor(n, 8, 64) for n in (0, 3, 17, 64, 1000)] == [8, 8, 16, 64, 64]
    assert templates.pow2_floor(2047) == 1024 and templates.pow2_floor(0) == 1
