"""Drafting without an LLM: TorchInductor's draft is the root, templates are its children; a failing
reference stops the search with its message and nothing is reported as best."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from kegen.search.loop import run_search
from kegen.search.operators.drafting import DraftError, draft_seeds
from lowering.backend.driver import MtiaDriver
from tests.search.search_helpers import EXAMPLES
from tests.search.test_loop import _config

pytestmark = pytest.mark.skipif(
    not MtiaDriver.is_active(), reason="Inductor drafts need the mtia driver (no GPU)"
)


def reference_fails(request):
    """An evaluator whose reference run fails, as kegen.eval reports it."""
    from kegen.eval.errors import ProblemError

    raise ProblemError("the problem's reference fails: Model(*get_init_inputs())(*get_inputs()) raised "
                       "RuntimeError: out of memory")  # fmt: skip


def test_inductor_draft_comes_first_and_the_template_second() -> None:
    drafts, analysis = draft_seeds(EXAMPLES / "softmax" / "problem.py")
    assert [d.origin for d in drafts] == ["inductor", "template:softmax"]
    assert "@triton.jit" in drafts[0].source and "class ModelNew" in drafts[0].source
    assert analysis.op_class == "softmax"


def test_a_problem_neither_drafter_takes_is_refused_naming_the_op(tmp_path) -> None:
    p = tmp_path / "inv.py"
    p.write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.linalg.inv(x)\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(DraftError, match=r"TorchInductor: .*linalg_inv.*templates: no Triton template for"):
        draft_seeds(p)


@pytest.mark.slow
def test_the_search_starts_from_the_inductor_draft_with_the_template_as_a_child(tmp_path, store) -> None:
    cfg = replace(_config(tmp_path, budget=2), seed=None, problem=EXAMPLES / "softmax" / "problem.py")
    r = run_search(cfg, store)
    assert "drafted by TorchInductor" in r.root.description
    children = store.children(r.root.id)
    assert any(c.operator == "draft" and "template" in c.description for c in children)


def test_a_failing_reference_stops_the_search_and_no_best_is_reported(tmp_path, store, capsys) -> None:
    cfg = _config(tmp_path, budget=6)
    cfg = replace(cfg, eval=replace(cfg.eval, evaluator="tests.search.test_draft_seeds:reference_fails"))
    r = run_search(cfg, store)
    assert "reference fails" in r.stop_reason and "out of memory" in r.stop_reason
    assert r.best is None and r.evaluations == 0
    assert not (r.out_dir / "best.py").exists()


def test_evolve_prints_no_best_when_nothing_is_correct(tmp_path, monkeypatch, capsys) -> None:
    from kegen.commands import evolve

    parser = argparse.ArgumentParser()
    evolve.add_arguments(parser)
    args = parser.parse_args(
        [str(EXAMPLES / "softmax" / "problem.py"), "--seed", str(EXAMPLES / "softmax" / "seed.py"),
         "--budget", "2", "--jobs", "0", "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "run"),
         "--evaluator", "tests.search.test_draft_seeds:reference_fails", "--no-progress", "--operator", "offline"]
    )  # fmt: skip
    assert evolve.run(args) == 0
    out = capsys.readouterr().out
    assert "no correct candidate" in out and "best speedup found" not in out and "best.py" not in out
