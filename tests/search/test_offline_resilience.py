"""A defective move never ends a search: the offline operator leaves out a move finder or a rewrite
that breaks on a source (with a warning), and the search driver turns an operator that raises into a
failed child instead of a crash."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from kegen.search import loop as loop_module
from kegen.search.config import OperatorConfig
from kegen.search.operators import offline
from kegen.search.operators.mutations import Mutation
from kegen.search.operators.offline import OfflineOperator
from kegen.suites import find_suite

SEED = find_suite("production").select(["attention_fwd_fp16"]).problems[0].seed_path.read_text()


def _ctx(code: str = SEED, target: str = "mtia") -> SimpleNamespace:
    return SimpleNamespace(
        parent_code=code,
        problem=SimpleNamespace(target=target, platform=target, path=None),
        profile=None,
        phase="improve",
        siblings=[],
        known_hashes=frozenset(),
        diagnosis=None,
        parent=SimpleNamespace(description="seed"),
        ancestors=[],
    )


def test_a_move_finder_that_breaks_is_left_out_with_a_warning(monkeypatch, caplog) -> None:
    def broken(source: str) -> list[Mutation]:
        raise IndexError("list index out of range")

    monkeypatch.setattr(offline, "attention_persist_mutations", broken)
    monkeypatch.setattr(offline, "_WARNED", set())
    op = OfflineOperator(OperatorConfig(kb_budget_chars=0))
    with caplog.at_level(logging.WARNING, logger=offline.__name__):
        names = [m.name for m in op.candidates(_ctx())]
    assert "attention_exp2@attention_kernel" in names and "attention_pipeline@attention_kernel" in names
    assert not any(n.startswith("attention_persist") for n in names)
    assert "broken failed and was skipped (IndexError" in caplog.text


def test_a_rewrite_that_breaks_is_skipped_and_the_next_move_is_written(monkeypatch, caplog) -> None:
    def explode(source: str) -> str:
        raise AssertionError("unexpected form")

    bad = Mutation("bad@k", "bad", "a move that breaks", explode, prior=9.0)
    good = Mutation("good@k", "good", "a move that works", lambda s: s + "\n# changed\n", prior=1.0)
    op = OfflineOperator(OperatorConfig(kb_budget_chars=0), use_diagnosis=False)
    monkeypatch.setattr(op, "candidates", lambda ctx: [bad, good])
    monkeypatch.setattr(offline, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger=offline.__name__):
        proposal = op.propose(_ctx())  # type: ignore[arg-type]
    assert proposal.code is not None and proposal.code.endswith("# changed\n")
    assert proposal.meta["mutation"] == "good@k"
    assert "bad@k failed and was skipped (AssertionError: unexpected form)" in caplog.text


def test_an_operator_that_raises_fails_its_child_and_the_search_goes_on(tmp_path, store, monkeypatch) -> None:
    from tests.search.test_loop import _config

    real = OfflineOperator.propose
    calls = {"n": 0}

    def flaky(self, ctx):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("operator bug")
        return real(self, ctx)

    monkeypatch.setattr(OfflineOperator, "propose", flaky)
    r = loop_module.run_search(_config(tmp_path, "greedy", budget=5), store)
    assert calls["n"] >= 3  # it kept proposing after the failure
    failed = [n for n in store.nodes(r.run_id) if "operator failed: operator bug" in (n.description or "")]
    assert len(failed) == 1 and failed[0].code in (None, "")
    assert r.best is not None and r.best.fitness > 1.0


@pytest.mark.parametrize("target", ["mtia", "nvidia"])
def test_candidates_of_a_source_that_does_not_parse_are_none(target: str) -> None:
    op = OfflineOperator(OperatorConfig(kb_budget_chars=0))
    assert op.candidates(_ctx("def broken(:\n", target)) == []  # type: ignore[arg-type]
