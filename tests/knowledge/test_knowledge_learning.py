"""Learning: verified improvements are saved with provenance into the user's layer; failures save nothing."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kegen.knowledge import (
    KnowledgeBase,
    LearningRejected,
    Provenance,
    save_learned_note,
    save_learned_sample,
)
from kegen.knowledge.samples import check_samples

SHIPPED = KnowledgeBase.shipped()
PROBLEM = """import torch


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(1000), torch.randn(1000)]


def get_init_inputs():
    return []
"""
CANDIDATE = (
    SHIPPED.file("code_samples/vector_add.py").read_text().split("class Model(")[0]
    + """
class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return add(x, y, block_size=256)
"""
)
PROV = {"run": "r42", "node": "n7", "speedup": "1.85"}


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase(tmp_path / "user", parent=SHIPPED)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    path = tmp_path / "add_problem.py"
    path.write_text(PROBLEM)
    return path


def test_saved_sample_is_indexed_with_provenance_and_runs(kb: KnowledgeBase, problem: Path) -> None:
    seen: list[str] = []

    def verify(src: str) -> bool:
        seen.append(src)
        return True

    path = save_learned_sample(
        kb,
        name="fast_add",
        source=CANDIDATE,
        problem_path=problem,
        provenance=PROV,
        verify=verify,
        platform="mtia",
        op_class="elementwise",
    )
    assert seen == [CANDIDATE]
    assert path == kb.root / "code_samples/learned/fast_add.py"
    assert "run r42, node n7, 1.85x" in path.read_text()
    assert (kb.root / "code_samples/learned/fast_add.problem.py").read_text() == PROBLEM
    entry = kb.entry("code_samples/learned/fast_add.py")
    assert entry.platforms == ("mtia",) and entry.op_classes == ("elementwise",) and "1.85x" in entry.summary
    assert entry.section == "Learned code samples"
    # the layered base still holds every shipped document, and the new one is retrievable
    assert len(kb.entries) == len(SHIPPED.entries) + 1
    assert kb.read("hardware/mtia/programming.md").text == SHIPPED.read("hardware/mtia/programming.md").text
    assert kb.search("fast_add")[0][0].path == "code_samples/learned/fast_add.py"
    # and it is a working sample: the companion problem file is used by the checker
    (result,) = check_samples([path], mode="interpret")
    assert result.ok, result.detail


def test_sample_that_fails_verification_is_not_saved(kb: KnowledgeBase, problem: Path) -> None:
    with pytest.raises(LearningRejected, match="failed its correctness check"):
        save_learned_sample(
            kb,
            name="bad_add",
            source=CANDIDATE,
            problem_path=problem,
            provenance=PROV,
            verify=lambda src: False,
        )
    assert not (kb.root / "code_samples/learned/bad_add.py").exists()
    assert kb.own_entries() == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "Bad Name"}, "lower-case"),
        ({"provenance": {"run": "r", "node": "n"}}, "missing speedup"),
        ({"provenance": {"run": "r", "node": "n", "speedup": "fast"}}, "not a number"),
        ({"provenance": {"run": "r", "node": "n", "speedup": -1}}, "positive"),
        ({"source": "print('no model')"}, "must define ModelNew"),
        ({"op_class": "sorting"}, "unknown op tag"),
    ],
)
def test_bad_requests_are_rejected_before_verification(
    kb: KnowledgeBase, problem: Path, kwargs: dict, message: str
) -> None:
    args: dict[str, Any] = dict(name="ok_name", source=CANDIDATE, problem_path=problem, provenance=PROV)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        save_learned_sample(kb, verify=lambda src: pytest.fail("verify must not run"), **args)


def test_missing_problem_file_is_rejected(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(LearningRejected, match="does not exist"):
        save_learned_sample(
            kb,
            name="x",
            source=CANDIDATE,
            problem_path=tmp_path / "nope.py",
            provenance=PROV,
            verify=lambda src: True,
        )


def test_saved_note_is_indexed_and_selected_for_its_step(kb: KnowledgeBase) -> None:
    from kegen.knowledge import select_documents

    path = save_learned_note(
        kb,
        name="stage_softmax",
        title="Two stages help wide softmax on MTIA",
        text="With rows above 8K elements, num_stages=2 hid the DMA latency.",
        tags="platform=mtia op=softmax bottleneck=memory phase=optimize",
        provenance=Provenance("r1", "n3", 1.3),
        summary="num_stages=2 for wide rows",
        verify=lambda: True,
    )
    text = path.read_text()
    assert text.startswith("# Two stages help wide softmax on MTIA") and "run r1, node n3, 1.30x" in text
    docs = select_documents(
        kb, platform="mtia", op_class="softmax", bottleneck="memory", phase="optimize", budget_chars=60000
    )
    assert "guidance/learned/stage_softmax.md" in [d.path for d in docs]
    assert "guidance/learned/stage_softmax.md" not in [
        d.path
        for d in select_documents(
            kb, platform="amd", op_class="softmax", bottleneck="memory", phase="optimize", budget_chars=60000
        )
    ]


@pytest.mark.parametrize(
    ("phase", "verify", "error", "match"),
    [
        ("any", lambda: False, LearningRejected, "failed its check"),
        ("ship", None, ValueError, "unknown phase tag"),
    ],
    ids=["failed-check", "bad-tags"],
)
def test_note_with_failed_check_or_bad_tags_is_rejected(
    kb: KnowledgeBase,
    phase: str,
    verify: Callable[[], bool] | None,
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        save_learned_note(
            kb,
            name="n",
            title="T",
            text="x",
            tags=f"platform=any op=any bottleneck=any phase={phase}",
            provenance=PROV,
            summary="s",
            verify=verify,
        )
    assert not (kb.root / "guidance").exists()


def test_provenance_parse() -> None:
    assert Provenance.parse("run=a,node=b,speedup=2.5x") == Provenance("a", "b", 2.5)


def test_default_base_layers_the_user_folder_from_kegen_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEGEN_HOME", str(tmp_path / "home"))
    kb = KnowledgeBase.default()
    assert kb.root == tmp_path / "home" / "knowledge"
    assert kb.parent is not None and kb.parent.root == SHIPPED.root
    assert [e.path for e in kb.entries] == [e.path for e in SHIPPED.entries]


def test_sample_verifier_runs_the_candidate_against_the_problem(problem: Path) -> None:
    from kegen.knowledge import sample_verifier

    verify = sample_verifier(problem, mode="interpret")
    assert verify(CANDIDATE) is True
    assert verify(CANDIDATE.replace("x + y, mask=mask)", "x + 2 * y, mask=mask)")) is False
