"""`kegen evolve --budget N`: the progress bar's total is N and it counts what the budget counts, so
free (screened) candidates never push it past N."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest


def test_the_bar_ends_at_the_budget_when_some_candidates_are_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kegen.search.config import EvalSliceConfig, SearchConfig, StoreConfig, TerminationConfig
    from kegen.search.loop import SearchDriver

    example = Path(__file__).parents[2] / "kegen" / "examples" / "softmax"
    config = SearchConfig(
        problem=example / "problem.py",
        seed=example / "seed.py",
        out_dir=tmp_path / "out",
        termination=TerminationConfig(max_evaluations=3),
        eval=EvalSliceConfig(jobs=0, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "s.db", warm_start=False),
        progress=True,
    )
    driver = SearchDriver(config)
    free = itertools.cycle([False, True])  # every other outcome is free (as a screened duplicate is)
    monkeypatch.setattr(driver.screening, "charged", lambda out: not next(free))
    result = driver.run()
    children = [n for n in driver.store.nodes(result.run_id) if n.parent_id is not None and n.evaluated]
    assert result.evaluations == 3 and len(children) > 3  # free candidates came on top of the budget
    bar: Any = driver.bar
    assert bar.total == 3 and bar.n == 3
