"""Recipes and launch-option knobs never produce a wrong candidate: each rewrite either declines
(MutationError) or gives a candidate that is correct on the simulated MTIA."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators import templates
from kegen.search.operators.drafting import draft_candidate
from kegen.search.operators.mutations import Mutation, MutationError, find_knobs, knob_mutations
from kegen.search.operators.mutations.knobs import option_defaults, option_space
from kegen.search.operators.mutations.recipes import recipe_mutations, softmax_shape
from tests.search.search_helpers import EXAMPLES

FIXTURES = Path(__file__).parent / "fixtures_drafting"
SIM = EvalConfig(target="mtia", trials=1)


def _all_recipes() -> dict[str, Mutation]:
    """Every recipe, gathered from the sources each one is meant for (so none is filtered out)."""
    sources = [
        (EXAMPLES / "softmax" / "seed.py").read_text(),
        (EXAMPLES / "matmul" / "seed.py").read_text(),
        templates.softmax("single_block"),  # has a block-by-scalar division (reciprocal)
    ]
    return {m.name: m for src in sources for m in recipe_mutations(src)}


def test_log_softmax_is_not_a_softmax() -> None:
    draft, _ = draft_candidate(FIXTURES / "log_softmax.py")
    assert softmax_shape(draft) is None
    assert [m.name for m in recipe_mutations(draft)] == []
    # without its logarithm it is still no softmax: it stores x - lse, not exp(x - max) / sum
    assert softmax_shape(draft.replace("tl.log(", "tl.exp(")) is None
    for variant in templates.SOFTMAX_VARIANTS:
        assert softmax_shape(templates.softmax(variant)) == variant


def test_every_recipe_declines_or_stays_correct_on_the_log_softmax_draft() -> None:
    path = FIXTURES / "log_softmax.py"
    draft, _ = draft_candidate(path)
    recipes = _all_recipes()
    assert {"online_softmax", "row_in_one_block", "reciprocal", "grouped_order_4"} <= set(recipes)
    outcomes = {}
    for name, m in sorted(recipes.items()):
        try:
            new = m.apply(draft)
        except MutationError:
            outcomes[name] = "declined"
            continue
        result = evaluate(path, new, config=SIM)
        assert result.status.value == "ok", (
            f"recipe {name} broke log_softmax: {result.status} {result.message}"
        )
        outcomes[name] = "ok"
    assert outcomes["row_in_one_block"] == "declined" and outcomes["online_softmax"] == "declined"


def test_a_wrong_softmax_rewrite_is_caught_so_the_check_above_means_something() -> None:
    path = FIXTURES / "log_softmax.py"
    result = evaluate(path, templates.softmax("single_block"), config=SIM)
    assert result.status.value == "incorrect"


def test_options_keep_their_type() -> None:
    seed = (EXAMPLES / "vector_add" / "seed.py").read_text()
    knobs = {k.name: k for k in find_knobs(seed) if k.option}
    assert set(knobs) == set(option_space())
    for name, k in knobs.items():
        assert type(k.value) is type(option_defaults()[name]) and k.value == option_defaults()[name]
    names = {m.name for m in knob_mutations(seed)}
    assert "red_accumulate=False@fused_elementwise_kernel#0" in names
    assert not any(n.startswith("red_accumulate=") and n[15:16].isdigit() for n in names)
    # an absent keyword is the backend's default, so no mutation proposes the default again
    assert not any(n.startswith(f"pe_mapping={option_defaults()['pe_mapping']}@") for n in names)


def test_options_go_to_kernel_launches_only() -> None:
    src = (
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n    pass\n\n"
        "def f(layers, x):\n    k[(1,)](x)\n    return layers[0](x)\n"
    )
    assert {k.kernel for k in find_knobs(src) if k.option} == {"k"}


@pytest.mark.parametrize("example", ["vector_add", "softmax"])
def test_every_backend_option_yields_applicable_mutations(example: str) -> None:
    """Each search_space() option and value gives a mutation that applies, parses and evaluates ok
    (num_stages only where a kernel loads in a loop: the softmax seed)."""
    seed = (EXAMPLES / example / "seed.py").read_text()
    problem = EXAMPLES / example / "problem.py"
    space, defaults = option_space(), option_defaults()
    muts = [m for m in knob_mutations(seed) if m.family in space and m.name.endswith("#0")]
    want = {
        (opt, repr(v))
        for opt, values in space.items()
        for v in values
        if v != defaults[opt] and (opt != "num_stages" or example == "softmax")
    }
    first: dict[str, Mutation] = {}  # one launch per option value (any kernel, first launch)
    for m in muts:
        first.setdefault(m.name.split("@")[0], m)
    got = set()
    for m in first.values():
        new = m.apply(seed)
        tree = ast.parse(new)
        value = next(
            kw.value.value  # type: ignore[attr-defined]
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            for kw in n.keywords
            if kw.arg == m.family
        )
        got.add((m.family, repr(value)))
        result = evaluate(problem, new, config=SIM)
        assert result.status.value == "ok", f"{m.name}: {result.status} {result.message}"
    assert got == want
