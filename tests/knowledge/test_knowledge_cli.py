"""`kegen kb list|show|search|add` through the real command line entry point."""

from pathlib import Path

import pytest

from kegen.cli import main
from kegen.knowledge import KnowledgeBase

SHIPPED = KnowledgeBase.shipped()


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_list_shows_every_document_with_tags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "list"]) == 0
    out = capsys.readouterr().out
    for e in SHIPPED.entries:
        assert e.path in out
    assert f"{len(SHIPPED.entries)} document(s)" in out


def test_list_filters_by_tag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "list", "--platform", "amd", "--phase", "debug"]) == 0
    out = capsys.readouterr().out
    assert "hardware/amd/debugging.md" in out and "hardware/nvidia" not in out and "hardware/mtia" not in out
    assert "hardware/amd/optimization.md" not in out


def test_show_prints_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "show", "hardware/mtia/programming.md"]) == 0
    assert capsys.readouterr().out == SHIPPED.read("hardware/mtia/programming.md").text


def test_show_unknown_document_fails_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "show", "hardware/tpu/guide.md"]) == 2
    assert "kegen kb list" in capsys.readouterr().err


def test_search_ranks_relevant_documents_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "search", "wavefront", "MFMA"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[1].startswith("hardware/amd/")
    assert main(["kb", "search", "zzzqqq"]) == 1


def test_add_note_then_list_it(tmp_path: Path, user_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = tmp_path / "dual-core-tip.md"
    note.write_text("# Dual core for address-heavy kernels\n\nGather kernels gained from dual_core=True.\n")
    rc = main(
        [
            "kb",
            "add",
            str(note),
            "--kind",
            "note",
            "--tags",
            "platform=mtia op=gather bottleneck=latency phase=optimize",
            "--provenance",
            "run=r9,node=n2,speedup=1.4",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    stored = user_home / "knowledge" / "guidance" / "dual-core-tip.md"
    assert "run r9, node n2, 1.40x" in stored.read_text()
    capsys.readouterr()
    assert main(["kb", "list", "--platform", "mtia", "--op", "gather"]) == 0
    assert "guidance/dual-core-tip.md" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kind", "platform", "error"),
    [("note", "tpu", "unknown platform tag 'tpu'"), ("sample", "any", "must be a .py file")],
    ids=["bad-tags", "wrong-kind"],
)
def test_add_rejects_bad_tags_and_wrong_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, platform: str, error: str
) -> None:
    note = tmp_path / "n.md"
    note.write_text("# N\n\ntext\n")
    tags = f"platform={platform} op=any bottleneck=any phase=any"
    assert main(["kb", "add", str(note), "--kind", kind, "--tags", tags]) == 2
    assert error in capsys.readouterr().err


def test_add_sample_verifies_it_first(
    tmp_path: Path, user_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "add_small_blocks.py"
    good.write_text(
        SHIPPED.file("code_samples/vector_add.py")
        .read_text()
        .replace("block_size: int = 1024", "block_size: int = 256")
    )
    bad = tmp_path / "add_wrong.py"
    bad.write_text(good.read_text().replace("x + y, mask=mask)", "x * y, mask=mask)"))
    tags = "platform=any op=elementwise bottleneck=memory phase=draft"
    assert main(["kb", "add", str(bad), "--kind", "sample", "--tags", tags, "--mode", "interpret"]) == 2
    assert "failed its check" in capsys.readouterr().err
    assert not (user_home / "knowledge" / "code_samples").exists()
    assert main(["kb", "add", str(good), "--kind", "sample", "--tags", tags, "--mode", "interpret"]) == 0
    out = capsys.readouterr().out
    assert "verified add_small_blocks.py in interpret mode" in out
    kb = KnowledgeBase.default()
    entry = kb.entry("code_samples/add_small_blocks.py")
    assert entry.title == "Vector add" and entry.bottlenecks == ("memory",)


def test_add_into_an_explicit_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "kb"
    note = tmp_path / "x.md"
    note.write_text("# X\n\nA note.\n")
    assert (
        main(
            [
                "kb",
                "--root",
                str(root),
                "add",
                str(note),
                "--kind",
                "note",
                "--tags",
                "platform=any op=any bottleneck=any phase=any",
            ]
        )
        == 0
    )
    assert [e.path for e in KnowledgeBase(root).entries] == ["guidance/x.md"]
