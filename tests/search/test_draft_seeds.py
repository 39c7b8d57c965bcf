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


def test_a_seeded_run_with_template_drafts_gets_the_template_as_the_seeds_child(tmp_path, store) -> None:
    """`--template-drafts` (kegen tune's group searches): the given seed stays the root and kegen's
    template draft of the problem starts beside it; without the flag a seeded run has no draft."""
    from kegen.search.setup import start_run

    problem = EXAMPLES / "softmax" / "problem.py"
    for flag, drafts in ((True, 1), (False, 0)):
        cfg = replace(_config(tmp_path / str(flag), budget=2), template_drafts=flag)
        start = start_run(cfg, store, problem, problem.read_text())
        root = store.root(start.run_id)
        assert root.operator == "seed" and root.code == (EXAMPLES / "softmax" / "seed.py").read_text()
        kids = [c for c in store.children(root.id) if c.operator == "draft"]
        assert len(kids) == drafts
        if drafts:
            assert "template" in kids[0].description and "@triton.jit" in kids[0].code


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


def _upcast_gemm(tmp_path, cast_back: bool = True):
    from tests.inductor.inductor_helpers import write_problem

    out = "(x.float() @ self.w.float().t())" + (".to(x.dtype)" if cast_back else "")
    return write_problem(
        tmp_path, "gemm_up", "self.w = nn.Parameter(torch.randn(32, 64).to(torch.float16))", f"return {out}",
        "[torch.randn(16, 64, dtype=torch.float16)]",
    )


def test_a_reference_that_upcasts_is_also_drafted_in_its_operands_dtype(tmp_path) -> None:
    drafts, _ = draft_seeds(_upcast_gemm(tmp_path))
    assert [d.origin for d in drafts][:2] == ["inductor", "inductor:native"]
    as_written, native = drafts[0].source, drafts[1].source
    # as written Inductor copies the fp16 operands to float32 in kernels of their own; natively it does not
    assert "to_copy" in as_written and "to_copy" not in native
    assert "no float32 upcasts" in drafts[1].description


def test_the_native_draft_is_correct_on_mtia(tmp_path) -> None:
    from kegen.eval import EvalConfig, evaluate

    problem = _upcast_gemm(tmp_path)
    drafts, _ = draft_seeds(problem)
    native = next(d for d in drafts if d.origin == "inductor:native")
    result = evaluate(str(problem), native.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert result.ok, result.message


def test_no_native_draft_where_the_outputs_dtype_would_change(tmp_path) -> None:
    drafts, _ = draft_seeds(_upcast_gemm(tmp_path, cast_back=False))  # returns float32 as written
    assert "inductor:native" not in [d.origin for d in drafts]


def test_a_model_converting_its_parameters_in_init_is_drafted(tmp_path) -> None:
    """`nn.Conv2d(...).to(torch.float16)` cannot run under fake tensors (Module._apply cannot swap a fake
    parameter's dtype): the model is built for real and the draft goes on (it used to be refused)."""
    from tests.inductor.inductor_helpers import write_problem

    problem = write_problem(
        tmp_path, "conv_half", "self.conv = nn.Conv2d(4, 8, 3, stride=2, padding=1).to(torch.float16)",
        "return self.conv(x.float().to(torch.float16))", "[torch.randn(1, 4, 8, 8, dtype=torch.float16)]",
    )
    drafts, _ = draft_seeds(problem)
    assert drafts[0].origin == "inductor" and "class ModelNew" in drafts[0].source


def test_a_gpu_machine_drafts_torch_compiles_code_for_its_gpu(tmp_path, monkeypatch) -> None:
    """Where Inductor's mtia draft cannot be made (a GPU machine), a GPU search starts from
    torch.compile's code for that GPU; before, a problem no template matched could not be searched."""
    import kegen.inductor.draft as inductor_draft
    import kegen.search.compile_candidate as cc
    from kegen.inductor.capture import CaptureError

    def unavailable(path):  # type: ignore[no-untyped-def]
        raise CaptureError("TorchInductor drafting is unavailable here: a CUDA GPU")

    monkeypatch.setattr(inductor_draft, "draft_from_inductor", unavailable)
    monkeypatch.setattr(cc, "gpu_drafter", lambda path, target: f"# compile's code for {target}\n")
    problem = _upcast_gemm(tmp_path)
    drafts, _ = draft_seeds(problem, target="nvidia")
    assert drafts[0].origin == "inductor:gpu" and drafts[0].source == "# compile's code for nvidia\n"
    drafts, _ = draft_seeds(problem, target="mtia")  # an mtia search falls to kegen's template (D79)
    assert [d.origin for d in drafts] == ["template:matmul"]
    from tests.inductor.inductor_helpers import write_problem

    flip = write_problem(tmp_path, "flip", "", "return torch.flip(x, [0])", "[torch.randn(4, 8)]")
    with pytest.raises(DraftError, match="unavailable here"):  # no template, no GPU draft to fall to
        draft_seeds(flip, target="mtia")


def test_inputs_sized_by_their_own_values_are_not_drafted_by_inductor(tmp_path) -> None:
    """An EmbeddingBag whose index count is `lengths.sum()`: Inductor's draft fixed that count at the
    captured draw and read outside the table's indices at others (a DMA fault on mtia, wrong on a GPU);
    it is refused with the reason, and the template draft is the root."""
    from kegen.inductor.capture import CaptureError, capture

    p = tmp_path / "bags.py"
    p.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.bag = nn.EmbeddingBag(500, 16, mode='sum')\n\n"
        "    def forward(self, ids, offsets):\n        return self.bag(ids, offsets)\n\n\n"
        "def get_inputs():\n    lengths = torch.randint(1, 9, (32,))\n"
        "    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])\n"
        "    return [torch.randint(0, 500, (int(lengths.sum()),)), offsets]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(CaptureError, match=r"sizes depend on its own random values \(input 0 is"):
        capture(p)
    drafts, _ = draft_seeds(p)
    assert [d.origin for d in drafts] == ["template:embedding"]
