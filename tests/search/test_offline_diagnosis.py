"""The offline operator chooses from the measured diagnosis (remedies), not from stall-name substrings."""

from __future__ import annotations

import json

from kegen.profiling import Diagnosis, diagnose
from kegen.search.config import OperatorConfig
from kegen.search.operators.context import OperatorContext, ProblemInfo
from kegen.search.operators.mutations.base import Mutation
from kegen.search.operators.offline import OTHER_KERNEL, OfflineOperator
from kegen.search.store import Node, code_hash
from tests.search.search_helpers import EXAMPLES, HERE, ROOT

GOLDEN = HERE / "golden"
SOFTMAX = diagnose(json.loads((GOLDEN / "softmax_seed.profile.json").read_text()))
GEMM = diagnose(json.loads((GOLDEN / "gemm_seed.profile.json").read_text()))


def _m(remedies: tuple[str, ...] = (), costs: tuple[str, ...] = (), kernel: str = "") -> Mutation:
    return Mutation("m", "f", "d", lambda s: s, remedies=remedies, costs=costs, kernel=kernel)


def test_diagnosis_term_follows_remedies_costs_and_kernel() -> None:
    term = OfflineOperator.diagnosis_term
    more = term(_m(("parallelism",), kernel="row_stats_kernel"), SOFTMAX)
    fewer = term(_m(("bigger_commands",), ("parallelism",), kernel="row_stats_kernel"), SOFTMAX)
    elsewhere = term(_m(("parallelism",), kernel="normalize_kernel"), SOFTMAX)
    assert more > 0 > fewer
    assert 0 < elsewhere <= OTHER_KERNEL * 2.0 < more  # the bottleneck was read from row_stats_kernel
    assert term(_m(("overlap",)), GEMM) > term(_m(("parallelism",)), GEMM) > 0
    # gemm has 64 programs on 64 PEs: a move that cuts programs is penalised beyond its remedies
    assert term(_m(("fewer_bytes", "bigger_commands"), ("parallelism",)), GEMM) < term(
        _m(("fewer_bytes",)), GEMM
    )
    assert dict(GEMM.protect)["parallelism"] > 0 and "parallelism" not in dict(GEMM.remedies[:1])
    assert term(_m(("parallelism",)), Diagnosis()) == 0.0  # withheld: no steering


def _ctx(folder, diag: Diagnosis) -> OperatorContext:
    code = (folder / "seed.py").read_text()
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=code, code_hash=code_hash(code), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target="mtia", island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    info = ProblemInfo(path=folder / "problem.py", source="", op_class=folder.name)
    return OperatorContext(info, node, code, None, "optimize", diag, None, [], [])


def test_the_diagnosis_changes_the_first_move() -> None:
    gemm = ROOT / "kegen" / "suites" / "default" / "gemm"
    with_diag = OfflineOperator(OperatorConfig(), seed=0)
    without = OfflineOperator(OperatorConfig(), seed=0, use_diagnosis=False)
    ctx = _ctx(gemm, GEMM)
    ranked = sorted(with_diag.candidates(ctx), key=lambda m: -with_diag.diagnosis_term(m, GEMM))
    best = ranked[0]
    top_two = {k for k, _ in GEMM.remedies[:2]}
    assert set(best.remedies) & top_two and with_diag.diagnosis_term(best, GEMM) > 0
    first = with_diag.propose(ctx)
    assert first.code is not None and with_diag.diagnosis_term(_family(with_diag, ctx, first.meta), GEMM) > 0
    # the control arm scores the same candidates with priors, gains and noise only
    assert without.score(best, GEMM) <= best.prior + 0.5 + 0.4


def _family(op: OfflineOperator, ctx: OperatorContext, meta: dict) -> Mutation:
    return next(m for m in op.candidates(ctx) if m.name == meta["mutation"].split("+")[0])


def test_softmax_seed_moves_avoid_shrinking_the_starved_grid() -> None:
    op = OfflineOperator(OperatorConfig(), seed=0)
    ctx = _ctx(EXAMPLES / "softmax", SOFTMAX)
    for m in op.candidates(ctx):
        t = op.diagnosis_term(m, SOFTMAX)
        if "parallelism" in m.costs and m.kernel == "row_stats_kernel":
            assert t < 0, m.name  # fewer programs for the launch that already starves 48 PEs
        if m.family.startswith("recipe_") and "fewer_launches" in m.remedies:
            assert t > 0, m.name  # fusing the two launches answers the launch share and the traffic


def test_launch_options_declare_which_way_helps() -> None:
    from kegen.search.operators.mutations.knobs import _option_effects

    assert _option_effects("sram_mode", "resident", "cache") == {"remedies": ("fewer_bytes",), "costs": ()}
    assert _option_effects("red_accumulate", False, True) == {"remedies": (), "costs": ("fewer_bytes",)}
    assert _option_effects("num_stages", 3, 1)["remedies"] == ("overlap",)
    assert _option_effects("num_stages", 1, 3)["costs"] == ("overlap",)
    assert _option_effects("some_future_option", 1, 0) == {"remedies": (), "costs": ()}
