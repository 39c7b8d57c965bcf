"""Finding and reading suites: names, folders, suite.toml, and the errors a user sees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kegen.suites import SuiteError, find_suite, list_suites, load_suite


def _copy(names: list[str], dest: Path) -> Path:
    src = find_suite("default")
    for p in src.select(names).problems:
        shutil.copytree(p.folder, dest / p.name)
    return dest


def test_default_suite_is_found_by_name_and_by_path() -> None:
    assert "default" in list_suites()
    by_name = find_suite("default")
    by_path = find_suite(str(by_name.root))
    assert by_name.name == by_path.name == "default"
    assert [p.name for p in by_name.problems] == [p.name for p in by_path.problems]
    gemm = by_name.select(["gemm"]).problems[0]
    assert gemm.problem_path.is_file() and gemm.seed_path.is_file()
    assert (gemm.op_class, gemm.kind, gemm.dtype) == ("gemm", "op", "float32")


def test_every_listed_problem_folder_is_in_the_manifest() -> None:
    suite = find_suite("default")
    folders = {d.name for d in suite.root.iterdir() if (d / "problem.py").is_file()}
    assert folders == {p.name for p in suite.problems}


def test_folder_without_manifest_discovers_problems(tmp_path: Path) -> None:
    _copy(["row_sum", "gelu"], tmp_path)
    (tmp_path / "notes").mkdir()  # not a problem: no problem.py
    suite = find_suite(tmp_path)
    assert [p.name for p in suite.problems] == ["gelu", "row_sum"]
    assert suite.problems[0].op_class == "other"


def test_select_keeps_suite_order_and_rejects_unknown_names() -> None:
    suite = find_suite("default")
    assert [p.name for p in suite.select(["softmax", "gemm"]).problems] == ["gemm", "softmax"]
    with pytest.raises(SuiteError, match="no problem.*nope"):
        suite.select(["nope"])


def test_unknown_suite_names_the_shipped_ones() -> None:
    with pytest.raises(SuiteError, match="default"):
        find_suite("no-such-suite")


def test_manifest_errors_say_what_to_fix(tmp_path: Path) -> None:
    _copy(["row_sum"], tmp_path)
    (tmp_path / "suite.toml").write_text('[[problem]]\nname = "row_sum"\nkind = "weird"\n')
    with pytest.raises(SuiteError, match="kind 'weird'"):
        load_suite(tmp_path)
    (tmp_path / "suite.toml").write_text('[[problem]]\nname = "missing"\n')
    with pytest.raises(SuiteError, match="lacks"):
        load_suite(tmp_path)
    (tmp_path / "suite.toml").write_text("[[problem]\n")
    with pytest.raises(SuiteError, match="not valid TOML"):
        load_suite(tmp_path)
    (tmp_path / "suite.toml").write_text('[[problem]]\nname = "row_sum"\n[[problem]]\nname = "row_sum"\n')
    with pytest.raises(SuiteError, match="more than once"):
        load_suite(tmp_path)


def test_empty_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="no problems"):
        load_suite(tmp_path)
