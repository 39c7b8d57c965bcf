"""kegen/eval is split along its trust boundary: `trusted/` (the evaluator E) and `sandboxed/`
(the zygote and the candidate's worker W). The sandboxed side never imports the trusted side."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import kegen.eval

EVAL = Path(kegen.eval.__file__).parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement anywhere in `path` names (function-level ones included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else f"kegen.eval.sandboxed.{node.module}"
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def test_no_sandboxed_module_imports_the_trusted_side() -> None:
    bad = [
        f"{path.relative_to(EVAL.parent.parent)}:{line}: {name}"
        for path in sorted((EVAL / "sandboxed").glob("*.py"))
        for line, name in _imports(path)
        if name.startswith("kegen.eval.trusted")
    ]
    assert not bad, bad


def test_a_worker_process_loads_nothing_of_the_trusted_side() -> None:
    modules = sorted(f"kegen.eval.sandboxed.{p.stem}" for p in (EVAL / "sandboxed").glob("*.py"))
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "from kegen.eval.sandboxed import zygote\n"
        "zygote._preimport()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kegen.eval'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "kegen.eval.sandboxed.cworker" in loaded
    assert not [m for m in loaded if m.startswith("kegen.eval.trusted")], loaded


def test_the_packages_split_the_modules_with_no_module_left_on_both_sides() -> None:
    trusted = {p.stem for p in (EVAL / "trusted").glob("*.py")} - {"__init__"}
    sandboxed = {p.stem for p in (EVAL / "sandboxed").glob("*.py")} - {"__init__"}
    shared = {p.stem for p in EVAL.glob("*.py")} - {"__init__"}
    assert {"evaluator", "session", "device", "device_memory", "sandbox"} <= trusted
    assert {"cworker", "zygote", "guards", "device_model"} <= sandboxed
    assert not (trusted & sandboxed) and not (trusted & shared) and not (sandboxed & shared)
