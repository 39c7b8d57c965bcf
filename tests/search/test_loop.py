"""The search driver with a fake evaluator: policies end to end, workers, termination, LLM children."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kegen.search.config import (
    EvalSliceConfig,
    OperatorConfig,
    PolicyConfig,
    SearchConfig,
    StoreConfig,
    TerminationConfig,
)
from kegen.search.loop import run_search
from kegen.search.termination import SearchProgress, Termination, parse_duration
from tests.search.search_helpers import EXAMPLES
from tests.search.test_llm_operator import GOOD, Script, _server


def _config(tmp_path, policy="uct", budget=8, jobs=0, **kw) -> SearchConfig:
    return SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=EXAMPLES / "softmax" / "seed.py",
        out_dir=tmp_path / f"run-{policy}-{jobs}",
        policy=PolicyConfig(name=policy),
        termination=kw.pop("termination", TerminationConfig(max_evaluations=budget)),
        eval=EvalSliceConfig(jobs=jobs, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "search.db", warm_start=False),
        progress=False,
        operator=kw.pop("operator", OperatorConfig(kb_budget_chars=0)),
        **kw,
    )


@pytest.mark.parametrize("policy", ["uct", "greedy", "evolutionary"])
def test_each_policy_improves_on_the_seed(tmp_path, store, policy) -> None:
    r = run_search(_config(tmp_path, policy), store)
    nodes = store.nodes(r.run_id)
    assert r.evaluations == 8 and len(nodes) == 9 and all(n.evaluated for n in nodes)
    assert r.best is not None and r.best.fitness > 1.5 and r.root.fitness == pytest.approx(1.0)
    assert len(store.children(r.root.id)) >= 3  # the draft phase
    assert (r.out_dir / "best.py").read_text() == r.best.code
    meta = json.loads((r.out_dir / "run.json").read_text())
    assert meta["run_id"] == r.run_id and meta["best_speedup"] == pytest.approx(r.best.fitness)
    assert store.get_run(r.run_id).stop_reason.startswith("evaluation budget")
    if policy == "evolutionary":
        assert len({n.island for n in nodes if n.parent_id is not None}) == 3
    if policy == "uct":
        assert store.node(r.root.id).visits == 9


def test_parallel_workers(tmp_path, store) -> None:
    r = run_search(_config(tmp_path, "uct", budget=6, jobs=2), store)
    assert r.evaluations == 6 and all(n.evaluated for n in store.nodes(r.run_id))
    assert r.best is not None and r.best.fitness > 1.0


def test_every_evaluation_of_a_run_gets_the_runs_secret_timing_seed(tmp_path, store, monkeypatch) -> None:
    """A variable-input problem's candidates are timed on the same draws within a run (D49); each
    run (and each resume) draws its own seed, which is never written to the store."""
    log = tmp_path / "timing_seeds.log"
    monkeypatch.setenv("KEGEN_FAKE_EVAL_TIMING_SEEDS", str(log))
    first = run_search(_config(tmp_path, budget=4), store)
    seeds = log.read_text().split()
    assert len(seeds) == 5 and len(set(seeds)) == 1 and seeds[0] != "None"  # the seed node and 4 children
    log.unlink()
    run_search(_config(tmp_path, "greedy", budget=3), store)
    assert set(log.read_text().split()) != set(seeds)
    assert seeds[0] not in json.dumps(store.get_run(first.run_id).config)


def test_stops_at_target_speedup_and_records_why(tmp_path, store) -> None:
    r = run_search(
        _config(tmp_path, termination=TerminationConfig(max_evaluations=50, target_speedup=2.0)), store
    )
    assert r.best.fitness >= 2.0 and r.evaluations < 50
    assert "target speedup" in store.get_run(r.run_id).stop_reason


def test_failed_candidates_are_nodes_not_crashes(tmp_path, store, monkeypatch) -> None:
    from tests.search import fake_eval

    real = fake_eval.cost
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    failed: set[str] = set()

    def failing(code: str) -> float:  # the first two candidates raise, whatever moves they are
        if code != seed and (code in failed or len(failed) < 2):
            failed.add(code)
            raise RuntimeError("boom")
        return real(code)

    monkeypatch.setattr(fake_eval, "cost", failing)
    r = run_search(_config(tmp_path, budget=10), store)
    bugs = [n for n in store.nodes(r.run_id) if n.is_bug]
    assert bugs and all(n.verdict == "runtime_error" and n.fitness == 0 for n in bugs)
    assert "boom" in store.evaluation(bugs[0].id).message


def test_llm_operator_in_the_loop(tmp_path, store) -> None:
    script = Script(
        [("ok", GOOD), ("ok", "no code today"), ("ok", GOOD.replace("128", "256"))] + [("ok", "none")] * 30
    )
    srv = _server(script)
    op = OperatorConfig(
        name="llm",
        base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1",
        api_key="k",
        models=("m1",),
        backoff_base_s=0.01,
        kb_budget_chars=0,
        cost_per_1k_input=1.0,
    )
    try:
        r = run_search(
            _config(
                tmp_path,
                budget=2,
                operator=op,
                termination=TerminationConfig(max_evaluations=2, max_tokens=100_000),  # no_code is free
            ),
            store,
        )
    finally:
        srv.shutdown()
    nodes = store.nodes(r.run_id)
    assert [n.verdict for n in nodes[1:4]] == ["ok", "no_code", "ok"]
    assert store.evaluation(nodes[2].id).message == "the reply has no fenced Python code block"
    usage = store.llm_usage(r.run_id)
    assert usage["calls"] == 3 and usage["tokens"] == 3600 and usage["cost"] == pytest.approx(3.0)
    assert store.prompts(nodes[1].id)[0][0] == "optimize.tmpl"  # a correct seed: edits of it
    assert r.best.fitness > 1.0


def test_token_budget_stops_an_llm_search(tmp_path, store) -> None:
    srv = _server(Script([("ok", "nothing")] * 10))
    op = OperatorConfig(
        name="llm", base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1", models=("m",), kb_budget_chars=0
    )
    try:
        r = run_search(
            _config(
                tmp_path, operator=op, termination=TerminationConfig(max_evaluations=50, max_tokens=2500)
            ),
            store,
        )
    finally:
        srv.shutdown()
    assert "token budget" in r.stop_reason and len(store.nodes(r.run_id)) == 4


def test_termination_rules() -> None:
    t = Termination(
        TerminationConfig(
            max_evaluations=0, plateau_steps=3, time_limit_s=10.0, max_cost=1.0, target_roofline_fraction=0.8
        )
    )
    p = SearchProgress()
    assert p.observe(1.2, 0.1) and t.reason(p) is None
    for _ in range(3):
        assert not p.observe(1.1, 0.1)
    assert "plateau" in t.reason(p)
    assert "time limit" in Termination(replace(t.config, plateau_steps=None)).reason(replace(p, elapsed_s=11))
    assert "cost" in Termination(replace(t.config, plateau_steps=None)).reason(replace(p, cost=2.0))
    assert "roofline" in t.reason(replace(p, best_roofline_fraction=0.9))
    assert parse_duration("90") == 90 and parse_duration("2m") == 120 and parse_duration("1.5h") == 5400
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


def test_without_a_seed_the_root_is_drafted_from_the_reference(tmp_path, store) -> None:
    cfg = replace(_config(tmp_path, budget=3), seed=None, problem=EXAMPLES / "vector_add" / "problem.py")
    r = run_search(cfg, store)
    assert r.root.description.startswith("drafted from the reference (elementwise: add)")
    assert (r.out_dir / "seed.py").read_text() == r.root.code
    # TorchInductor's draft is the root and the template draft its child (issue 15); where Inductor
    # drafting is unavailable (a GPU machine) the template draft is the root
    drafts = [r.root.code] + [c.code or "" for c in store.children(r.root.id)]
    assert any("fused_elementwise_kernel" in d for d in drafts)
    assert r.evaluations == 3


def test_children_drafted_before_their_parent_was_judged_learn_against_its_fitness(
    tmp_path, store, monkeypatch
) -> None:
    from kegen.search.operators.offline import OfflineOperator

    seen: list[float] = []
    real = OfflineOperator.observe

    def observe(self, proposal, parent_fitness, fitness):  # type: ignore[no-untyped-def]
        seen.append(parent_fitness)
        real(self, proposal, parent_fitness, fitness)

    monkeypatch.setattr(OfflineOperator, "observe", observe)
    r = run_search(_config(tmp_path, "uct", budget=6, jobs=2), store)
    early = [n for n in store.children(r.root.id) if n.created_at < (r.root.evaluated_at or 0)]
    assert early, "with two workers the root's first children are drafted while it is evaluated"
    assert len(seen) == 6 and all(f == pytest.approx(1.0) or f > 1.0 for f in seen)  # never 0: unjudged


def test_children_are_written_under_the_process_wide_ast_lock(tmp_path, store, monkeypatch) -> None:
    """Searches side by side in threads (the recorder) must not parse at once: Python 3.11's ast keeps
    one recursion depth per interpreter ("SystemError: AST constructor recursion depth mismatch")."""
    import threading

    from kegen.search.loop import AST_LOCK
    from kegen.search.operators.offline import OfflineOperator

    held: list[bool] = []
    real = OfflineOperator.propose

    def propose(self, ctx):  # type: ignore[no-untyped-def]
        free: list[bool] = []

        def try_lock() -> None:  # from another thread: fails while this one holds the lock
            got = AST_LOCK.acquire(blocking=False)
            if got:
                AST_LOCK.release()
            free.append(got)

        probe = threading.Thread(target=try_lock)
        probe.start()
        probe.join()
        held.append(not free[0])
        return real(self, ctx)

    monkeypatch.setattr(OfflineOperator, "propose", propose)
    run_search(_config(tmp_path, "uct", budget=3), store)
    assert held and all(held)
