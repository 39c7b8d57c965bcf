"""Every module of the three packages imports cleanly (catches syntax errors and import cycles)."""

import ast
import importlib
import pkgutil
from pathlib import Path

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


def _imports(path: Path, *, top_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


LOWERING = Path(lowering.__file__).parent
CORE = ["passes", "codegen", "ir", "analysis", "pipeline.py", "listing.py", "errors.py", "options.py"]


def test_lowering_core_does_not_import_the_triton_adapter() -> None:
    """The adapter (lowering.backend) depends on the core, never the reverse; the core never imports
    Triton (its options are `lowering.options`, with no Triton and no kegen in them)."""
    for part in CORE:
        root = LOWERING / part
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for mod in _imports(path):
                assert not mod.startswith(("lowering.backend", "triton")), f"{path}: imports {mod}"


def test_no_import_cycles_between_lowering_packages() -> None:
    """analysis -> ir, passes -> analysis/ir, codegen -> passes/analysis/ir, never back (imports
    anywhere in a module)."""
    allowed = {"ir": set(), "analysis": {"ir"}, "passes": {"ir", "analysis"}, "codegen": {"ir", "passes", "analysis"}}
    for pkg, deps in allowed.items():
        for path in sorted((LOWERING / pkg).rglob("*.py")):
            for mod in _imports(path):
                parts = mod.split(".")
                if parts[0] == "lowering" and len(parts) > 1 and parts[1] in allowed and parts[1] != pkg:
                    assert parts[1] in deps, f"{path}: {pkg} imports {mod}"


def _fresh_modules(code: str) -> set[str]:
    import json
    import subprocess
    import sys

    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_import_triton_loads_little_of_kegen() -> None:
    """Triton imports kegen's mtia backend at `import triton`: that must not pull the simulator, the
    TTIR parser or the compiler core (tools/bench_import_cost.py measures the time)."""
    mods = _fresh_modules("import triton")
    ours = sorted(m for m in mods if m.split(".")[0] in ("lowering", "mtia_sim"))
    # lowering, lowering.backend, its compiler, driver and options, lowering.options, lowering.compat
    assert len(ours) <= 7, ours
    for heavy in ("lark", "unicorn", "llvmlite", "mtia_sim", "lowering.ttir", "lowering.passes"):
        assert heavy not in mods, f"import triton loads {heavy}"


def test_lowering_passes_package_is_lazy() -> None:
    mods = _fresh_modules("import lowering.passes")
    assert not any(m.startswith(("lowering.passes.", "lowering.codegen", "lark")) for m in mods)


def test_test_modules_import_by_full_name_or_unique_basename() -> None:
    """Test folders that are packages (an __init__.py) import their modules by full name; in the others,
    pytest imports by basename, so those basenames must be unique across them."""
    from collections import Counter

    tests_dir = Path(__file__).parent
    assert (tests_dir / "__init__.py").is_file()
    plain = [
        p for p in tests_dir.rglob("*.py")
        if p.name not in ("conftest.py", "__init__.py") and not (p.parent / "__init__.py").is_file()
    ]
    names = Counter(p.name for p in plain)
    assert [n for n, c in names.items() if c > 1] == []


def test_mtia_sim_isa_does_not_load_unicorn() -> None:
    """The command encoding is importable without the emulator (mtia_sim's exports are lazy)."""
    import subprocess
    import sys

    code = "import sys, mtia_sim.isa; print('unicorn' in sys.modules, 'mtia_sim.simulator' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    from mtia_sim import Simulator

    assert Simulator.__module__ == "mtia_sim.simulator"
