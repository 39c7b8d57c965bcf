"""The pass manager: the default pipeline as one list, abstract `apply`, typed options (typos and
wrong types rejected), schedule spaces, pipelines with callbacks and the verifier between passes,
and the `kegen lower` flags built on it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from kegen.cli import main
from lowering.ir.module import Module
from lowering.ir.verifier import VerifierError
from lowering.options import MtiaOptions
from lowering.passes.manager import (
    Pass,
    PassContext,
    PassPipeline,
    UnknownOptionError,
    register_pass,
    search_field,
    unregister_pass,
)
from lowering.pipeline import (
    DEFAULT_PASSES,
    Instrumentation,
    check_option_names,
    compile_ttir,
    default_pipeline,
    instrument,
    known_passes,
    parse_pipeline,
    search_space,
)
from lowering.ttir.parser import parse_ttir

GOLDEN = Path(__file__).parent / "golden_passes"


def _ttir(name: str = "vector_add") -> str:
    return (GOLDEN / f"{name}.ttir").read_text()


@dataclass(frozen=True)
class CountOps(Pass):
    """A pass a researcher adds: counts the kernel's ops of one dialect."""

    name: ClassVar[str] = "count-ops"
    analysis: ClassVar[bool] = True
    dialect: str = search_field("arith", ("arith", "tt"))

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = sum(op.name.startswith(self.dialect + ".") for op in ctx.kernel.walk())


@pytest.fixture
def extra_pass() -> Iterator[type[CountOps]]:
    """Make CountOps known by name for one test (no central list is edited), then forget it."""
    register_pass(CountOps)
    try:
        yield CountOps
    finally:
        unregister_pass(CountOps.name)


def test_default_pipeline_is_one_explicit_list_in_dependency_order() -> None:
    names = [p.name for p in DEFAULT_PASSES]
    assert names == ["inline-calls", "liveness", "pointer-analysis", "multi-buffering", "pe-mapping", "unit-mapping"]
    assert default_pipeline().names == names and list(known_passes()) == names
    for cls in DEFAULT_PASSES:
        for dep in cls.requires:
            assert names.index(dep) < names.index(cls.name)


def test_apply_is_abstract() -> None:
    @dataclass(frozen=True)
    class Forgetful(Pass):
        name: ClassVar[str] = "forgetful"

    with pytest.raises(TypeError, match="abstract"):
        Forgetful()  # type: ignore[abstract]


def test_search_space_comes_from_the_passes() -> None:
    space = search_space()
    assert space["num_stages"] == (1, 2, 3) and space["red_accumulate"] == (True, False)
    assert space["pe_mapping"] == ("round_robin", "blocked") and space["dual_core"] == (False, True)
    declared = {n: v for cls in DEFAULT_PASSES for n, v in cls.schedule_space().items()}
    assert space == {**declared, "sram_mode": ("cache", "resident")}


def test_options_configure_passes() -> None:
    pipeline = default_pipeline(MtiaOptions(num_stages=3, block_dma=False))
    by_name = {p.name: p for p in pipeline.passes}
    assert by_name["multi-buffering"].num_stages == 3  # type: ignore[attr-defined]
    assert by_name["pointer-analysis"].block_dma is False  # type: ignore[attr-defined]
    assert default_pipeline({"num_stages": 2}).passes == default_pipeline(MtiaOptions(num_stages=2)).passes


def test_unknown_option_names_the_typo_and_the_valid_names() -> None:
    with pytest.raises(UnknownOptionError) as info:
        check_option_names({"num_stage": 3})
    msg = str(info.value)
    assert "'num_stage'" in msg and "did you mean 'num_stages'" in msg and "block_dma" in msg
    with pytest.raises(UnknownOptionError, match="pass multi-buffering has no option 'num_stage'"):
        parse_pipeline("inline-calls,pointer-analysis,multi-buffering{num_stage=2}")
    with pytest.raises(UnknownOptionError, match="unknown pass 'pointer-analysys'.*pointer-analysis"):
        parse_pipeline("pointer-analysys")


def test_parse_pipeline_with_options_and_missing_requirement() -> None:
    p = parse_pipeline("inline-calls, pointer-analysis{block_dma=false}, multi-buffering{num_stages=2}")
    assert p.names == ["inline-calls", "pointer-analysis", "multi-buffering"]
    assert p.passes[1].block_dma is False and p.passes[2].num_stages == 2  # type: ignore[attr-defined]
    ctx = PassContext(parse_ttir(_ttir()))
    with pytest.raises(Exception, match="multi-buffering requires pointer-analysis"):
        parse_pipeline("multi-buffering").run(ctx)


def test_pipeline_options_follow_their_declared_types() -> None:
    """A textual option takes its field's type: `true`/`false` for a bool, digits for an int, any
    word for a str; a value of the wrong type is named instead of passing through as a string."""
    p = parse_pipeline("pe-mapping{pe_mapping=blocked dual_core=TRUE}, multi-buffering{num_stages=3}")
    assert p.passes[0].pe_mapping == "blocked" and p.passes[0].dual_core is True  # type: ignore[attr-defined]
    assert p.passes[1].num_stages == 3  # type: ignore[attr-defined]
    with pytest.raises(UnknownOptionError, match="num_stages of pass multi-buffering is int: 'two'"):
        parse_pipeline("multi-buffering{num_stages=two}")
    with pytest.raises(UnknownOptionError, match="block_dma of pass pointer-analysis is a bool.*'1'"):
        parse_pipeline("pointer-analysis{block_dma=1}")
    with pytest.raises(ValueError, match="pe_mapping must be one of"):
        PassPipeline.parse("pe-mapping{pe_mapping=diagonal}", known_passes())


def test_callback_runs_after_each_pass() -> None:
    seen: list[str] = []
    ctx = PassContext(parse_ttir(_ttir()), MtiaOptions())
    default_pipeline(ctx.options).run(ctx, lambda p, c: seen.append(p.name), verify=True)
    assert seen == [p.name for p in DEFAULT_PASSES]
    assert ctx.result("pointer-analysis") is not None and "unit-mapping" in ctx.results
    with pytest.raises(Exception, match="pass result 'nope' is missing"):
        ctx.result("nope")


def test_a_registered_pass_is_known_by_name_not_added_to_the_default(extra_pass: type[CountOps]) -> None:
    assert extra_pass.schedule_space() == {"dialect": ("arith", "tt")}
    ctx = PassContext(parse_ttir(_ttir()), {"dialect": "tt"})
    assert "count-ops" in known_passes() and "count-ops" not in default_pipeline().names
    parse_pipeline("inline-calls,count-ops{dialect=tt}").run(ctx)
    assert ctx.results["count-ops"] > 0
    assert "dialect" not in search_space()


def test_verify_each_names_the_pass_that_broke_the_ir(extra_pass: type[CountOps]) -> None:
    @dataclass(frozen=True)
    class Breaker(Pass):
        name: ClassVar[str] = "breaker"

        def apply(self, module: Module, ctx: PassContext) -> None:
            ret = next(op for op in ctx.kernel.walk() if op.name == "tt.return")
            ret.erase()  # a block without its terminator

    register_pass(Breaker)
    try:
        with pytest.raises(VerifierError, match="after pass breaker"):
            with instrument(Instrumentation(verify_each=True, pipeline="inline-calls,breaker")):
                compile_ttir(_ttir())
    finally:
        unregister_pass("breaker")


def test_print_after_through_instrumentation() -> None:
    out = io.StringIO()
    with instrument(Instrumentation(print_after=frozenset({"multi-buffering"}), stream=out)):
        compile_ttir(_ttir())
    text = out.getvalue()
    assert text.count("IR Dump After") == 1 and "IR Dump After multi-buffering" in text
    assert "tt.func public @" in text


KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)
"""


@pytest.fixture
def kfile(tmp_path: Path) -> Path:
    p = tmp_path / "scale.py"
    p.write_text(KERNEL)
    return p


def _lower(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lower", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _scale(kfile: Path) -> list[str]:
    return [str(kfile), "--kernel", "scale", "--signature", "x_ptr=*fp32,y_ptr=*fp32,n=i32", "--constexpr", "BLOCK=32"]


def test_cli_print_after_all_and_verify_each(kfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _lower(capsys, *_scale(kfile), "--emit", "tile", "--print-after-all", "--verify-each")
    assert rc == 0, err
    assert [ln.split()[5] for ln in err.splitlines() if "IR Dump After" in ln] == [p.name for p in DEFAULT_PASSES]
    assert "arith.mulf" in out
    rc, _, err = _lower(capsys, *_scale(kfile), "--emit", "tile", "--print-after", "unit-mapping")
    assert rc == 0 and err.count("IR Dump After") == 1 and "-> SIMD" in err


def test_cli_rejects_typos(kfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _lower(capsys, *_scale(kfile), "--option", "num_stage=3")
    assert rc == 1 and "did you mean 'num_stages'" in err
    rc, _, err = _lower(capsys, *_scale(kfile), "--print-after", "unit-maping")
    assert rc == 1 and "no pass unit-maping" in err


@pytest.mark.parametrize("stage", ["ttir", "tile", "llir", "rvasm"])
def test_cli_from_an_edited_stage(
    stage: str, kfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, text, err = _lower(capsys, *_scale(kfile), "--emit", stage)
    assert rc == 0, err
    edited = tmp_path / f"scale.{stage}"
    edited.write_text(text)
    ref = tmp_path / "ref.elf"
    assert _lower(capsys, *_scale(kfile), "--emit", "elf", "-o", str(ref))[0] == 0
    out = tmp_path / "out.elf"
    rc, _, err = _lower(capsys, str(edited), "--from", stage, "--emit", "elf", "-o", str(out))
    assert rc == 0, err
    assert out.read_bytes() == ref.read_bytes()
    if stage == "tile":  # an edit shows in the later stages
        edited.write_text(text.replace("dense<2.0>", "dense<3.0>"))
        rc, llir, err = _lower(capsys, str(edited), "--from", "tile", "--emit", "llir")
        assert rc == 0, err
        rc, ref_llir, _ = _lower(capsys, *_scale(kfile), "--emit", "llir")
        assert llir != ref_llir


def test_cli_list_passes(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _lower(capsys, "--list-passes")
    assert rc == 0 and "multi-buffering" in out and "num_stages=1 in (1, 2, 3)" in out


def test_triton_compile_options_with_a_typo_are_rejected_not_defaulted() -> None:
    """`triton.compile(..., options={'num_stage': 3})` names the typo instead of giving the defaults;
    options meant for other backends (Inductor passes its own) are still ignored."""
    from triton.backends.compiler import GPUTarget

    from lowering.backend.compiler import MtiaBackend

    backend = MtiaBackend(GPUTarget("mtia", "2i", 1))
    with pytest.raises(ValueError, match=r"'num_stage'.*did you mean 'num_stages'"):
        backend.parse_options({"num_stage": 3})
    assert backend.parse_options({"num_stages": 3, "waves_per_eu": 1}).num_stages == 3
