"""`kegen profile --source`: the per-line view and a trace whose commands are named by source line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kegen.cli import main

EXAMPLES = Path(__file__).parents[2] / "kegen" / "examples"


def _mtia_unusable() -> str | None:
    from kegen.eval.timing_mtia import backend_status

    return backend_status()  # None where kernel[grid](...) runs on the simulated MTIA (not on GPU hosts)


@pytest.mark.slow
@pytest.mark.skipif(_mtia_unusable() is not None, reason="the mtia backend is not Triton's active driver here")
def test_profile_source_view_and_trace(tmp_path, capsys) -> None:
    problem, seed = EXAMPLES / "vector_add" / "problem.py", EXAMPLES / "vector_add" / "seed.py"
    trace = tmp_path / "va.trace.json"
    assert main(["profile", str(problem), str(seed), "--source", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "measured bottleneck" in out and "source view (per Triton source line" in out
    assert "seed.py:" in out and "tl.load(" in out
    written = [Path(p) for p in sorted(tmp_path.glob("va.trace*.json"))]
    assert written
    events = json.loads(written[0].read_text())["traceEvents"]
    labelled = [e for e in events if e.get("ph") == "X" and "source" in e.get("args", {})]
    assert labelled and all(" seed.py:" in e["name"] for e in labelled)
    assert any("tl." in e["args"].get("source_text", "") for e in labelled)
