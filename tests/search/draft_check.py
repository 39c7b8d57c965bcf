"""The drafted-template tests' common check: a problem's template draft evaluated on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")


def assert_draft_correct_on_mtia(problem: Path, op_class: str | None = None, marker: str | None = None) -> str:
    """`analyze(problem)`'s template draft (of `op_class`, holding `marker`), checked against the
    reference on the simulator (two trials); returns its source."""
    a = analyze(problem)
    assert a.source is not None, a.summary
    assert op_class is None or a.op_class == op_class, a.summary
    assert marker is None or marker in a.source, a.summary
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message
    return a.source
