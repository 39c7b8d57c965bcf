"""The architecture rules (tools/check_architecture.py): the checker finds each kind of violation,
and the code base keeps the rules (only the checker's short ALLOWED list, work under way, may remain)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    """tools/check_architecture.py (tools are scripts, not a package)."""
    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module("check_architecture")
    finally:
        sys.path.remove(str(TOOLS))


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_lazy_import_closes_a_cycle_and_type_checking_imports_do_not(arch: ModuleType, tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from app.b import f\n",
            "app/b.py": "def f():\n    from app import a\n    return a\n",
            "app/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.d import X\n",
            "app/d.py": "from app.c import TYPE_CHECKING\n",
            "app/e.py": "from . import f\n",
            "app/f.py": "import app.e as e\n",
        },
    )
    found = arch.check(tmp_path, ("app",), ())
    assert [v.rule for v in found] == ["cycle", "cycle"]
    first, second = found
    assert first.subject == "app.a" and "app.a, app.b" in first.message
    assert "app/b.py:2 app.b -> app.a" in first.message  # the lazy import, with its line
    assert str(first).startswith("app/a.py:1: [cycle]")
    assert second.subject == "app.e" and "app/e.py:1 app.e -> app.f" in second.message  # relative import


def test_sizes_folders_and_layers(arch: ModuleType, tmp_path: Path) -> None:
    files = {"low/__init__.py": "", "low/core.py": "import high.api\nimport triton.language as tl\n"}
    files |= {"low/big.py": "x = 1\n" * (arch.MAX_LINES + 1), "high/__init__.py": "", "high/api.py": ""}
    files |= {f"many/m{i}.py": "" for i in range(arch.MAX_MODULES)} | {"many/__init__.py": ""}
    files |= {f"scripts/s{i}.py": "" for i in range(arch.MAX_MODULES + 1)}  # no __init__: not a package
    _tree(tmp_path, files)
    layers = (
        arch.Layer("low-alone", ("low",), ("high", "triton"), why="low is the bottom"),
        arch.Layer("not-yet", ("nowhere.sandboxed",), ("nowhere.trusted",)),  # packages still to come
    )
    found = {(v.rule, v.where, v.line) for v in arch.check(tmp_path, ("low", "high", "many", "scripts"), layers)}
    assert found == {
        ("size", "low/big.py", 1),
        ("folder", "many/__init__.py", 1),
        ("layer:low-alone", "low/core.py", 1),
        ("layer:low-alone", "low/core.py", 2),
    }


def test_allowed_violations_match_by_rule_and_subject(arch: ModuleType) -> None:
    v = arch.Violation("cycle", "lowering.ir.module", "lowering/ir/module.py", 3, "")
    assert v.allowed([("cycle", "lowering.ir.")]) and v.allowed([("cycle", "lowering.ir.module")])
    assert not v.allowed([("size", "lowering.ir.")]) and not v.allowed([("cycle", "lowering.ir")])


def test_the_code_base_keeps_the_rules(arch: ModuleType) -> None:
    violations = arch.check()
    failing = [str(v) for v in violations if not v.allowed()]
    assert not failing, "architecture rules broken:\n" + "\n".join(failing)
    if violations:  # only ALLOWED ones: work under way, listed in the checker
        pytest.xfail("allowed while being fixed:\n" + "\n".join(map(str, violations)))
