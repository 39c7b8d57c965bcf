"""Golden text tests of the tile passes: TTIR in golden_passes/*.ttir, expected lines of the tile
stage's listing (units, block accesses, multi-buffering, allocation) in golden_passes/*.check.

A .check file holds `CHECK:` lines that must appear in order, `CHECK-NOT:` lines that must not
appear, `// OPTIONS: k=v ...` (MtiaOptions) and `// INPUT: file.ttir` (default: same stem).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lowering.codegen.local_alloc import LocalStoreAllocator
from lowering.options import MtiaOptions
from lowering.passes.liveness import liveness
from lowering.passes.multibuffer import MultiBuffering, ring_depths
from lowering.passes.pointer_analysis import analyze_pointers
from lowering.pipeline import compile_ttir
from lowering.ttir.parser import parse_ttir

GOLDEN = Path(__file__).parent / "golden_passes"
CHECKS = sorted(GOLDEN.glob("*.check"))


def _parse_check(path: Path) -> tuple[Path, MtiaOptions, list[str], list[str]]:
    src = path.with_suffix(".ttir")
    opts: dict[str, object] = {}
    checks, nots = [], []
    for line in path.read_text().splitlines():
        if line.startswith("// OPTIONS:"):
            for kv in line.split(":", 1)[1].split():
                k, v = kv.split("=")
                opts[k] = {"True": True, "False": False}.get(v, int(v) if v.isdigit() else v)
        elif line.startswith("// INPUT:"):
            src = GOLDEN / line.split(":", 1)[1].strip()
        elif line.startswith("CHECK:"):
            checks.append(line[len("CHECK:") :].strip())
        elif line.startswith("CHECK-NOT:"):
            nots.append(line[len("CHECK-NOT:") :].strip())
    return src, MtiaOptions(**opts), checks, nots  # type: ignore[arg-type]


@pytest.mark.parametrize("check", CHECKS, ids=[c.stem for c in CHECKS])
def test_golden_listing(check: Path) -> None:
    src, options, checks, nots = _parse_check(check)
    ck = compile_ttir(src.read_text(), options)
    listing = f"{ck.artifacts['tile']}\n{ck.artifacts['llir']}"  # analyses, then the local-store layout
    lines = listing.splitlines()
    pos = 0
    for expected in checks:
        for i in range(pos, len(lines)):
            if expected in lines[i]:
                pos = i + 1
                break
        else:
            pytest.fail(
                f"{check.name}: expected line not found (in order): {expected!r}\n--- listing ---\n{listing}"
            )
    for forbidden in nots:
        assert not any(forbidden in ln for ln in lines), f"{check.name}: unexpected {forbidden!r}"


def _fn(name: str):  # type: ignore[no-untyped-def]
    return parse_ttir((GOLDEN / f"{name}.ttir").read_text()).kernels[0]


def test_pointer_analysis_api() -> None:
    fn = _fn("vector_add")
    info = analyze_pointers(fn)
    loads = [op for op in fn.walk() if op.name == "tt.load"]
    assert all(info.access(op) is not None for op in loads)
    assert not info.needs_buffer(next(op for op in fn.walk() if op.name == "tt.make_range").results[0])
    off = analyze_pointers(fn, enabled=False)
    assert all(off.access(op) is None for op in loads)


def test_liveness_releases_after_last_use() -> None:
    fn = _fn("vector_add")
    live = liveness(fn)
    add = next(op for op in fn.walk() if op.name == "arith.addf")
    dying = {v.name_hint for v in live.values_dying_after(add)}
    assert {"x_5", "y_7"} <= dying


def test_multibuffering_marks_loop_loads() -> None:
    fn = _fn("matmul_loop")
    info = analyze_pointers(fn)
    assert ring_depths(fn, info, 1) == {}
    stages = ring_depths(fn, info, 3)
    assert sorted(stages.values()) == [3, 3]
    assert MultiBuffering.schedule_space()["num_stages"] == (1, 2, 3)


def test_allocator_first_fit_and_reuse() -> None:
    a = LocalStoreAllocator(1024)
    x = a.allocate(100, "x")
    y = a.allocate(64, "y")
    assert (x.offset, x.size, y.offset) == (0, 128, 128)
    a.release(x)
    z = a.allocate(96, "z")
    assert z.offset == 0 and a.peak == 192


def test_pe_mapping_plans() -> None:
    from lowering.passes.pe_mapping import PEMapping

    rr = PEMapping().plan((300, 2, 1), 64, 2)
    assert rr.grid == (300, 2, 1) and rr.extra_slots == ()
    blocked = PEMapping("blocked").plan((300, 2, 1), 64, 2)
    assert blocked.programs_per_core == 5 and blocked.grid == (60, 2, 1) and blocked.extra_slots == (5, 300)
    dual = PEMapping("blocked", dual_core=True).plan((300, 1, 1), 64, 2)
    assert dual.programs_per_core == 3 and dual.grid == (100, 1, 1)
    assert PEMapping("blocked").plan((10, 1, 1), 64, 2).grid == (10, 1, 1)


def test_pointer_analysis_follows_pointers_carried_by_loops() -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tests.lowering.test_lower_e2e import matmul_tutorial_kernel

    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn"]
    sig = {n: "*fp32" if n.endswith("ptr") else "i32" for n in names} | {
        n: "constexpr" for n in ("BM", "BN", "BK")
    }
    k = triton.compile(
        ASTSource(matmul_tutorial_kernel, sig, {"BM": 16, "BN": 16, "BK": 16}),
        target=GPUTarget("mtia", "2i", 1),
    )
    fn = parse_ttir(k.asm["ttir"]).kernels[0]
    info = analyze_pointers(fn)
    (moving,) = info.carried.values()
    assert sorted(moving) == [0, 1]  # both pointer iter_args move by a uniform step
    loads = [op for op in fn.walk() if op.name == "tt.load"]
    assert all(info.access(op) is not None for op in loads)
    assert "carry(" in info.access(loads[0]).describe()
    assert not any(info.needs_buffer(c.arg) for c in moving.values())
