"""Retrieval: the documents chosen for representative search steps, the order, the budget, determinism."""

import pytest

from kegen.knowledge import Document, IndexFormatError, KnowledgeBase, select_documents
from kegen.knowledge.retrieval import MIN_PARTIAL_CHARS, cut_to_budget, matching_entries

KB = KnowledgeBase.shipped()


def _paths(docs: list[Document]) -> list[str]:
    return [d.path for d in docs]


@pytest.mark.parametrize(
    "platform, op, bottleneck, phase, must_have",
    [
        ("mtia", "matmul", None, "draft", ["constraints/mtia-rules.md", "hardware/mtia/programming.md"]),
        (
            "mtia",
            "softmax",
            "memory",
            "optimize",
            ["constraints/mtia-rules.md", "hardware/mtia/optimization.md"],
        ),
        ("mtia", "elementwise", "correctness", "debug", ["hardware/mtia/debugging.md"]),
        ("nvidia", "attention", "compute", "optimize", ["hardware/nvidia/optimization.md"]),
        ("amd", "matmul", "compute", "optimize", ["hardware/amd/optimization.md"]),
    ],
)
def test_representative_steps(
    platform: str, op: str, bottleneck: str | None, phase: str, must_have: list[str]
) -> None:
    docs = select_documents(KB, platform=platform, op_class=op, bottleneck=bottleneck, phase=phase)
    paths = _paths(docs)
    assert paths[0] == "index.md" and "Knowledge base index" in docs[0].text
    for path in must_have:
        assert path in paths, f"{path} not chosen: {paths}"
    assert sum(len(d.text) for d in docs) <= 12000
    others = {"mtia", "nvidia", "amd"} - {platform}
    assert not any(p.startswith(f"hardware/{o}/") for p in paths for o in others), paths
    for d in docs[1:]:
        entry = KB.entry(d.path)
        assert phase in entry.phases or "any" in entry.phases
        assert op in entry.op_classes or "any" in entry.op_classes


def test_order_is_index_platform_rules_platform_guide_general_rules_then_samples() -> None:
    docs = select_documents(
        KB, platform="mtia", op_class="matmul", bottleneck=None, phase="draft", budget_chars=40000
    )
    paths = _paths(docs)
    assert paths[:3] == ["index.md", "constraints/mtia-rules.md", "hardware/mtia/programming.md"]
    assert set(paths[3:5]) == {"constraints/candidate-rules.md", "constraints/triton-language-rules.md"}
    assert paths.index("code_samples/matmul.py") < paths.index("guidance/matmul-and-attention.md")
    assert paths.index("guidance/matmul-and-attention.md") < paths.index("guidance/triton-idioms.md")
    assert "code_samples/vector_add.py" not in paths and "code_samples/row_softmax.py" not in paths


def test_index_excerpt_lists_every_eligible_document_even_those_left_out() -> None:
    docs = select_documents(
        KB, platform="mtia", op_class="softmax", bottleneck="memory", phase="optimize", budget_chars=9000
    )
    eligible = matching_entries(
        KB, platform="mtia", op_class="softmax", bottleneck="memory", phase="optimize"
    )
    for e in eligible:
        assert f"]({e.path})" in docs[0].text
    assert len(docs) - 1 < len(eligible)


def test_budget_is_respected_for_every_budget() -> None:
    for budget in (500, 3000, 8000, 12000, 20000, 60000):
        docs = select_documents(
            KB,
            platform="mtia",
            op_class="reduction",
            bottleneck="memory",
            phase="optimize",
            budget_chars=budget,
        )
        assert sum(len(d.text) for d in docs) <= budget, budget


def test_bigger_budget_adds_documents_without_reordering() -> None:
    small = _paths(
        select_documents(
            KB, platform="amd", op_class="matmul", bottleneck="compute", phase="optimize", budget_chars=12000
        )
    )
    big = _paths(
        select_documents(
            KB, platform="amd", op_class="matmul", bottleneck="compute", phase="optimize", budget_chars=40000
        )
    )
    assert len(big) > len(small)
    assert [p for p in big if p in small] == small


def test_deterministic() -> None:
    kwargs = dict(platform="nvidia", op_class="softmax", bottleneck="memory", phase="optimize")
    first = select_documents(KB, **kwargs)
    assert all(select_documents(KB, **kwargs) == first for _ in range(3))


def test_no_bottleneck_and_any_mean_no_filter() -> None:
    none = matching_entries(KB, platform="mtia", op_class="matmul", bottleneck=None, phase="optimize")
    any_ = matching_entries(KB, platform="mtia", op_class="matmul", bottleneck="any", phase="optimize")
    assert [e.path for e in none] == [e.path for e in any_]
    mem = matching_entries(KB, platform="mtia", op_class="matmul", bottleneck="memory", phase="optimize")
    assert len(mem) <= len(none)


def test_unknown_tags_are_rejected() -> None:
    with pytest.raises(IndexFormatError, match="platform"):
        select_documents(KB, platform="tpu", op_class="matmul", bottleneck=None, phase="draft")
    with pytest.raises(IndexFormatError, match="phase"):
        select_documents(KB, platform="mtia", op_class="matmul", bottleneck=None, phase="deploy")


def test_cut_keeps_whole_sections_and_never_cuts_code() -> None:
    doc = KB.read("hardware/mtia/isa-reference.md")
    cut = cut_to_budget(doc, 4000)
    assert cut is not None and len(cut.text) <= 4000
    assert "left out to fit the prompt" in cut.text and "kegen kb show" not in cut.text
    kept = cut.text.split("\n[... the rest")[0].rstrip()
    assert doc.text.startswith(kept) and doc.text[len(kept) :].lstrip().startswith("## ")
    assert cut_to_budget(doc, MIN_PARTIAL_CHARS - 1) is None
    sample = KB.read("code_samples/matmul.py")
    assert cut_to_budget(sample, len(sample.text) - 1) is None
    assert cut_to_budget(sample, len(sample.text)) == sample


def test_op_class_synonyms_used_by_the_suites_are_understood() -> None:
    from kegen.knowledge import canonical_op_class

    assert canonical_op_class("gemm") == "matmul" and canonical_op_class("Embedding") == "gather"
    assert canonical_op_class("search") == "any" and canonical_op_class("softmax") == "softmax"
    with pytest.raises(IndexFormatError, match="unknown op class 'sorting'"):
        canonical_op_class("sorting")
    gemm = select_documents(
        KB, platform="mtia", op_class="gemm", bottleneck=None, phase="draft", budget_chars=40000
    )
    matmul = select_documents(
        KB, platform="mtia", op_class="matmul", bottleneck=None, phase="draft", budget_chars=40000
    )
    assert gemm == matmul


def test_every_op_class_of_the_shipped_suites_is_understood() -> None:
    import tomllib
    from pathlib import Path

    import kegen
    from kegen.knowledge import canonical_op_class

    suites = Path(kegen.__file__).parent / "suites"
    classes = {
        p.get("op_class", "other")
        for f in suites.rglob("suite.toml")
        for p in tomllib.loads(f.read_text()).get("problem", [])
    }
    for name in classes:
        canonical_op_class(name)


def test_prompts_carry_no_command_the_model_cannot_run() -> None:
    """Human-only passages (commands, tools) are stripped from every document a prompt can carry."""
    import re

    from kegen.knowledge import KnowledgeBase
    from kegen.knowledge.retrieval import for_prompt

    kb = KnowledgeBase.default()
    commands = re.compile(r"`(kegen |ncu|nsys|rocprof|omniperf|compute-sanitizer|TRITON_INTERPRET|[A-Z_]+_(DUMP|BLOCKING|KERNEL)=)")
    for entry in kb.entries:
        text = for_prompt(kb.read(entry.path).text)
        assert "human-only" not in text, entry.path
        assert not commands.search(text), f"{entry.path}: {commands.search(text)}"
    assert for_prompt("a\n<!-- human-only -->\nrun `x`\n<!-- /human-only -->\nb\n") == "a\nb\n"
