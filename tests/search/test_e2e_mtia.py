"""End to end on the simulated MTIA (real kegen eval, real Triton backend, real simulator)."""

from __future__ import annotations

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
from tests.search.search_helpers import EXAMPLES


@pytest.mark.slow
def test_offline_search_on_simulated_mtia_beats_the_seed(tmp_path, store) -> None:
    cfg = SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=EXAMPLES / "softmax" / "seed.py",
        out_dir=tmp_path / "run",
        policy=PolicyConfig(name="uct", draft_children=3),
        operator=OperatorConfig(name="offline"),
        termination=TerminationConfig(max_evaluations=4),
        eval=EvalSliceConfig(target="mtia", machine="mtia-2i", jobs=1),
        store=StoreConfig(db=tmp_path / "search.db", warm_start=False),
        progress=False,
    )
    r = run_search(cfg, store)
    root_eval = store.evaluation(r.root.id)
    assert r.root.verdict == "ok", f"the seed must run on the simulated MTIA: {root_eval.message}"
    assert r.best is not None and r.best.parent_id is not None and r.best.verdict == "ok"
    best_eval = store.evaluation(r.best.id)
    assert best_eval.candidate_time_s < root_eval.candidate_time_s
    assert r.best.fitness > 1.2
    assert best_eval.profile.get("target") == "mtia"
