"""Winners found on one branch are tried on the others: the offline operator's transplants."""

from __future__ import annotations

from kegen.profiling import Diagnosis
from kegen.search.config import OperatorConfig
from kegen.search.operators.base import Proposal
from kegen.search.operators.context import Attempt, OperatorContext, ProblemInfo
from kegen.search.operators.mutations.gemm_plan import epilogue_mutations
from kegen.search.operators.offline import OfflineOperator
from kegen.search.store import Node, code_hash
from tests.search.search_helpers import ROOT

GELU = ROOT / "kegen" / "suites" / "production" / "linear_bias_gelu_bf16"


def _node(code: str, description: str, node_id: int = 5) -> Node:
    return Node(
        id=node_id, run_id="r", parent_id=1, depth=1, code=code, code_hash=code_hash(code), status="done",
        verdict="ok", score=2.0, speedup=2.0, is_bug=False, operator="offline", description=description,
        target="mtia", island=0, visits=1, value_sum=2.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip


def _ctx(code: str, description: str, attempts: list[Attempt]) -> OperatorContext:
    info = ProblemInfo(path=GELU / "problem.py", source="", op_class="gemm")
    return OperatorContext(
        info, _node(code, description), code, None, "optimize", Diagnosis(), None, attempts, []
    )


def _gelu_win(op: OfflineOperator, gain: float) -> str:
    description = epilogue_mutations((GELU / "seed.py").read_text())[0].description
    meta = {"mutation": "gelu_sigmoid", "family": "epilogue"}
    op.observe(Proposal("code", description, "offline", meta=meta), 1.0, 1.0 + gain)
    return description


def test_a_move_that_won_elsewhere_is_tried_first_on_another_branch() -> None:
    seed = (GELU / "seed.py").read_text()
    op = OfflineOperator(OperatorConfig(), seed=0)
    for family in ("plan", "gemm_plan", "block_up", "block_down", "knob"):  # big wins on a weak parent
        op.observe(Proposal("code", f"{family} on the seed", "offline", meta={"family": family}), 1.0, 2.5)
    before = op.propose(_ctx(seed, "re-tiled", []))
    assert before.meta["mutation"] != "gelu_sigmoid"  # the families' averages outrank it
    description = _gelu_win(op, 0.06)
    after = op.propose(_ctx(seed, "re-tiled", []))
    assert after.meta["mutation"] == "gelu_sigmoid" and after.description == description


def test_no_transplant_into_a_lineage_that_has_it_or_for_a_small_gain() -> None:
    seed = (GELU / "seed.py").read_text()
    small = OfflineOperator(OperatorConfig(), seed=0)
    _gelu_win(small, 0.005)  # below TRANSPLANT_MIN_GAIN: noise, not a win
    assert small.propose(_ctx(seed, "re-tiled", [])).meta["mutation"] != "gelu_sigmoid"

    op = OfflineOperator(OperatorConfig(), seed=0)
    description = _gelu_win(op, 0.06)
    ancestor = Attempt(node_id=2, description=f"something; {description}", verdict="ok", fitness=1.5,
                       relation="ancestor")  # fmt: skip
    assert not op.transplants(epilogue_mutations(seed)[0], {description})
    # the ancestor applied it (in a pair): the move is not pushed again (the source here still has the
    # tanh form only because the test reuses the seed)
    assert op.propose(_ctx(seed, "re-tiled", [ancestor])).meta["mutation"] != "gelu_sigmoid"
    # pairs are not recorded as wins of a single move
    pair = Proposal("code", "a; b", "offline", meta={"mutation": "a+b", "family": "f", "pair": True})
    op.observe(pair, 1.0, 2.0)
    assert "a; b" not in op.wins
