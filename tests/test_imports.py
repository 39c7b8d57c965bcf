"""Every module of the three packages imports cleanly (catches syntax errors and import cycles)."""

import importlib
import pkgutil

import pytest

import kegen
import lowering
import mtia_sim


def _all_modules() -> list[str]:
    names = []
    for pkg in (kegen, lowering, mtia_sim):
        names.append(pkg.__name__)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            if ".examples" in info.name or info.name.endswith("__main__"):
                continue
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _all_modules())
def test_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__name__ == name


def test_mtia_sim_does_not_import_triton_or_lowering() -> None:
    """DESIGN.md: mtia_sim runs RISC-V images, whoever produced them."""
    import ast
    from pathlib import Path

    root = Path(mtia_sim.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            for m in mods:
                assert not m.startswith(("triton", "lowering", "kegen")), f"{path}: imports {m}"


@pytest.mark.parametrize("name", ["lowering.backend.driver", "lowering.backend.compiler"])
def test_backend_modules_import_first_in_a_fresh_process(name: str) -> None:
    """Triton's backend discovery imports these modules itself; importing them first must work."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_test_module_basenames_are_unique() -> None:
    """Test folders have no __init__.py, so pytest imports test modules by basename."""
    from collections import Counter
    from pathlib import Path

    tests_dir = Path(__file__).parent
    names = Counter(p.name for p in tests_dir.rglob("*.py") if p.name != "conftest.py")
    assert [n for n, c in names.items() if c > 1] == []
