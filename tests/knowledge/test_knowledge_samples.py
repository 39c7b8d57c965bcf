"""Every code sample in the knowledge base is correct: it matches its PyTorch reference when run on the
simulator (through kegen's mtia Triton backend) and in Triton's interpreter."""

from pathlib import Path

import pytest

from kegen.knowledge import KnowledgeBase
from kegen.knowledge.samples import SampleCheck, check_samples, mtia_unavailable_reason

KB = KnowledgeBase.shipped()
SAMPLES = [e.path for e in KB.entries if e.kind == "sample"]


@pytest.fixture(scope="module")
def interpreted() -> dict[str, SampleCheck]:
    results = check_samples([KB.file(p) for p in SAMPLES], mode="interpret")
    return dict(zip(SAMPLES, results, strict=True))


@pytest.fixture(scope="module")
def simulated() -> dict[str, SampleCheck]:
    reason = mtia_unavailable_reason()
    if reason is not None:
        pytest.skip(f"cannot run samples on the simulator: {reason}")
    results = check_samples([KB.file(p) for p in SAMPLES], mode="mtia")
    return dict(zip(SAMPLES, results, strict=True))


def test_there_are_samples_for_the_core_op_classes() -> None:
    ops = {op for e in KB.entries if e.kind == "sample" for op in e.op_classes}
    assert {"elementwise", "softmax", "matmul", "normalization"} <= ops


@pytest.mark.parametrize("path", SAMPLES)
def test_sample_matches_reference_in_the_interpreter(path: str, interpreted: dict[str, SampleCheck]) -> None:
    result = interpreted[path]
    assert result.mode == "interpret"
    assert result.ok, result.detail


@pytest.mark.parametrize("path", SAMPLES)
def test_sample_matches_reference_on_the_simulator(path: str, simulated: dict[str, SampleCheck]) -> None:
    result = simulated[path]
    assert result.mode == "mtia"
    assert result.ok, result.detail


def test_a_wrong_sample_is_reported_as_failing(tmp_path: Path) -> None:
    """The checker must not pass a kernel that computes the wrong thing."""
    src = KB.file("code_samples/vector_add.py").read_text()
    wrong = tmp_path / "wrong_add.py"
    wrong.write_text(src.replace("x + y, mask=mask)", "x - y, mask=mask)"))
    broken = tmp_path / "broken_add.py"
    broken.write_text(src.replace("class ModelNew", "class NotModelNew"))
    bad, missing = check_samples([wrong, broken], mode="interpret")
    assert not bad.ok and "differs from the reference" in bad.detail
    assert not missing.ok and "missing ModelNew" in missing.detail
