"""The run report shows the best kernel's measured profile and why each step of its path is faster."""

from __future__ import annotations

import json

from kegen.report.html import write_report
from kegen.report.text import text_report
from tests.search.search_helpers import EXAMPLES, HERE, new_run

GOLDEN = HERE / "golden"


def test_report_explains_the_child_that_fixes_the_idle_pes(store, tmp_path) -> None:
    run = new_run(store, str(EXAMPLES / "softmax" / "problem.py"))
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    child = (GOLDEN / "softmax_split_rows.py").read_text()
    root = store.add_node(run, parent_id=None, code=seed, operator="seed", description="seed")
    store.record_evaluation(
        root, status="ok", fitness=1.0, profile=json.loads((GOLDEN / "softmax_seed.profile.json").read_text())
    )
    kid = store.add_node(
        run, parent_id=root, code=child, operator="llm", description="split each row over 4 programs"
    )
    profile = json.loads((GOLDEN / "softmax_split_rows.profile.json").read_text())
    for line in profile["lines"]:
        line["text"] = ""  # as stored by the sandboxed evaluator: the report fills it from the node's code
    store.record_evaluation(kid, status="ok", fitness=2.76, profile=profile)
    text = text_report(store, run)
    assert f"node {kid} <- {root} (split each row over 4 programs): 2.76x faster: fixes the idle PEs" in text
    assert "16 -> 64 of 64 PEs" in text and "measured bottleneck" in text
    assert "softmax_split_rows.py:36" in text and "tl.store(y_ptr + row * row_stride + cols, tl.exp(x - m)" in text
    page = write_report(store, run, tmp_path).read_text()
    assert "<table>" in page and "fixes the idle PEs" in page
