"""The shipped knowledge base: every document is listed, every tag is valid, index.md parses and edits."""

from pathlib import Path

import pytest

from kegen.knowledge import TAG_KEYS, IndexFormatError, KnowledgeBase
from kegen.knowledge.index import IndexEntry, insert_entry, parse_index, parse_index_line, parse_tags
from kegen.knowledge.samples import PROBLEM_SUFFIX

KB = KnowledgeBase.shipped()
SECTIONS_BY_FOLDER = {"constraints": "Constraints", "guidance": "Guidance", "code_samples": "Code samples"}


def _document_files(root: Path) -> set[str]:
    files = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or "__pycache__" in rel or path.name in ("index.md", "__init__.py"):
            continue
        if rel.endswith(PROBLEM_SUFFIX):
            continue  # companion problem of a learned sample, not a document itself
        files.add(rel)
    return files


def test_every_document_is_listed_and_every_listed_document_exists() -> None:
    listed = [e.path for e in KB.entries]
    assert len(listed) == len(set(listed)), "a document is listed twice"
    on_disk = _document_files(KB.root)
    assert on_disk - set(listed) == set(), "documents missing from index.md"
    assert set(listed) - on_disk == set(), "index.md lists files that do not exist"


def test_required_tree_is_present() -> None:
    paths = {e.path for e in KB.entries}
    for platform in ("mtia", "nvidia", "amd"):
        for topic in ("architecture", "programming", "optimization", "debugging"):
            assert f"hardware/{platform}/{topic}.md" in paths
    assert any(p.startswith("constraints/") for p in paths)
    assert any(p.startswith("guidance/") for p in paths)
    assert sum(p.startswith("code_samples/") for p in paths) >= 4


def test_every_tag_is_in_the_vocabulary() -> None:
    for e in KB.entries:
        for key, values in (
            ("platform", e.platforms),
            ("op", e.op_classes),
            ("bottleneck", e.bottlenecks),
            ("phase", e.phases),
        ):
            assert values, f"{e.path}: no {key} tag"
            assert set(values) <= set(TAG_KEYS[key]), f"{e.path}: bad {key} tags {values}"
            assert not ("any" in values and len(values) > 1), f"{e.path}: 'any' mixed with other {key} tags"


def test_hardware_documents_are_tagged_with_their_platform() -> None:
    for e in KB.entries:
        if e.path.startswith("hardware/"):
            assert e.platforms == (e.path.split("/")[1],), e.path


def test_every_op_class_and_phase_has_a_document() -> None:
    for op in TAG_KEYS["op"]:
        if op != "any":
            assert any(op in e.op_classes for e in KB.entries if e.path.startswith("guidance/")), op
    for phase in ("draft", "debug", "optimize"):
        assert any(phase in e.phases for e in KB.entries), phase


def test_documents_have_a_heading_and_titles_summaries_are_filled() -> None:
    for e in KB.entries:
        doc = KB.read(e.path)
        assert e.title and e.summary.endswith("."), e.path
        if e.path.endswith(".md"):
            assert doc.text.startswith("# "), f"{e.path} must start with a '# ' heading"
        else:
            assert doc.text.startswith('"""'), f"{e.path} must start with a docstring"


def test_nvidia_and_amd_documents_cite_their_sources() -> None:
    for e in KB.entries:
        if e.path.startswith(("hardware/nvidia/", "hardware/amd/")) and "architecture" in e.path:
            assert "Sources:" in KB.read(e.path).text, e.path


def test_parse_line_round_trip() -> None:
    line = (
        "- [Title](a/b.md) — what it is. `platform=mtia,amd op=matmul bottleneck=memory phase=draft,optimize`"
    )
    entry = parse_index_line(line)
    assert entry == IndexEntry(
        "a/b.md", "Title", "what it is.", ("mtia", "amd"), ("matmul",), ("memory",), ("draft", "optimize")
    )
    assert entry.to_line() == line


@pytest.mark.parametrize(
    "line, message",
    [
        ("- [T](p.md) — s. `platform=tpu op=any bottleneck=any phase=any`", "unknown platform tag 'tpu'"),
        ("- [T](p.md) — s. `platform=any op=any bottleneck=any`", "missing tag keys phase"),
        (
            "- [T](p.md) — s. `platform=any op=any bottleneck=any phase=any colour=red`",
            "unknown tag key 'colour'",
        ),
        ("- [T](p.md) no tags", "expected '- [Title](path) — summary `tags`'"),
    ],
)
def test_bad_lines_are_rejected_with_a_reason(line: str, message: str) -> None:
    with pytest.raises(IndexFormatError, match="line 3"):
        parse_index("# t\n\n" + line)
    with pytest.raises(IndexFormatError) as info:
        parse_index_line(line)
    assert message in str(info.value)


def test_parse_tags_rejects_duplicates() -> None:
    with pytest.raises(IndexFormatError, match="given twice"):
        parse_tags("platform=any platform=mtia op=any bottleneck=any phase=any")


def test_insert_entry_into_existing_new_and_replaced_sections() -> None:
    text = "# Index\n\n## Guidance\n\n- [A](g/a.md) — a. `platform=any op=any bottleneck=any phase=any`\n\n## Code samples\n"
    e = IndexEntry("g/b.md", "B", "b.", ("mtia",), ("any",), ("any",), ("debug",))
    out = insert_entry(text, e, "Guidance")
    entries = parse_index(out)
    assert [x.path for x in entries] == ["g/a.md", "g/b.md"]
    assert entries[1].section == "Guidance"
    out2 = insert_entry(
        out, IndexEntry("n/c.md", "C", "c.", ("any",), ("any",), ("any",), ("any",)), "Learned"
    )
    assert parse_index(out2)[-1].section == "Learned"
    replaced = insert_entry(
        out2, IndexEntry("g/b.md", "B2", "b2.", ("amd",), ("any",), ("any",), ("any",)), "X"
    )
    titles = {x.path: x.title for x in parse_index(replaced)}
    assert titles["g/b.md"] == "B2" and len(parse_index(replaced)) == 3
