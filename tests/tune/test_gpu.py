"""GPU drafts (kegen.tune.gpu, kegen.inductor.gpu_draft): a recorded Inductor CUDA output translated into a
KernelBench candidate (run by the evaluator on cpu: Triton's interpreter), the library-op refusal, the
clear error without a CUDA device, the never-slower-than-compile rule; on a CUDA machine the real
draft evaluated on nvidia against the evaluator's torch.compile."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kegen.inductor.capture import Capture, CaptureError, GraphInput, load_problem
from kegen.inductor.gpu_draft import GpuCapture, gpu_kernels, write_gpu_candidate
from kegen.tune import gpu
from kegen.tune.capture import TuneError
from tests.triton_interpreter import runs_gpu_templates

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = FIXTURES / "gpu_linear_relu_amax.py"
CODE = (FIXTURES / "gpu_linear_relu_amax.output_code.txt").read_text()
CONFIGS = json.loads((FIXTURES / "gpu_linear_relu_amax.configs.json").read_text())


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available() and not getattr(torch.version, "hip", None)


def _capture(code: str = CODE, configs: dict | None = None) -> GpuCapture:
    cap = Capture(
        code=code,
        inputs=[
            GraphInput("parameter", "fc.weight"),
            GraphInput("parameter", "fc.bias"),
            GraphInput("user", index=0),
        ],
        forward_args=["x"],
        user_outputs=1,
        single_output=True,
        model_source_module=load_problem(PROBLEM),
    )
    return GpuCapture(cap, CONFIGS if configs is None else configs, "NVIDIA H200")


def test_kernels_are_read_from_the_output_text() -> None:
    kernels = gpu_kernels(ast.parse(CODE))
    tem, per = kernels["triton_tem_fused_addmm_relu_0"], kernels["triton_per_fused_amax_1"]
    assert tem.kind == "template" and tem.params == ["in_ptr0", "arg_A", "arg_B", "out_ptr1"]
    assert tem.decorator_config == {"num_warps": 4, "num_stages": 2}
    assert tem.inductor_meta["grid_type"] == "FixedGrid" and tem.inductor_meta["extra_launcher_args"]
    assert per.kind == "persistent_reduction" and per.constexprs == ["XBLOCK"]
    assert per.helpers == {"max2"} and "triton_helpers." not in per.source
    assert per.source.startswith("@triton.jit\ndef triton_per_fused_amax_1(")


@runs_gpu_templates
def test_recorded_cuda_output_becomes_a_correct_candidate() -> None:
    from kegen.eval import EvalConfig, evaluate

    source, info = write_gpu_candidate(_capture(), PROBLEM, "nvidia")
    # Inductor's launches with its grids and the configs its autotuning chose
    assert (
        "triton_tem_fused_addmm_relu_0[(1, 1, 1,)](p_fc_bias, x, p_fc_weight, buf1, num_warps=4, num_stages=2)"
        in source
    )
    assert (
        "triton_per_fused_amax_1[(8, 1, 1,)](buf1, buf2, 8, 32, XBLOCK=1, num_warps=2, num_stages=1)"
        in source
    )
    assert info.configs["triton_per_fused_amax_1"] == {"XBLOCK": 1, "num_warps": 2, "num_stages": 1}
    for runtime in (
        "get_raw_stream",
        "DeviceGuard",
        "set_device",
        "assert_size_stride",
        ".run(",
        "extern_kernels",
    ):
        assert runtime not in source
    compile(source, "candidate.py", "exec")
    r = evaluate(str(PROBLEM), source, config=EvalConfig(target="cpu", trials=2, timing_runs=1))
    assert r.ok, r.message


def test_another_recorded_config_changes_the_grid() -> None:
    configs = {"triton_per_fused_amax_1": {"kwargs": {"XBLOCK": 4}, "num_warps": 1, "num_stages": 1}}
    source, _ = write_gpu_candidate(_capture(configs=configs), PROBLEM, "nvidia")
    assert (
        "triton_per_fused_amax_1[(2, 1, 1,)](buf1, buf2, 8, 32, XBLOCK=4, num_warps=1, num_stages=1)"
        in source
    )


def test_a_kernel_without_a_recorded_config_is_refused() -> None:
    with pytest.raises(CaptureError, match="triton_per_fused_amax_1: no launch config was recorded"):
        write_gpu_candidate(_capture(configs={}), PROBLEM, "nvidia")


def test_launch_arguments_are_translated_too() -> None:
    code = CODE.replace(
        "triton_per_fused_amax_1.run(buf1, buf2, 8, 32, stream=stream0)",
        "triton_per_fused_amax_1.run(reinterpret_tensor(buf1, (8, 32), (32, 1), 0), buf2, 8, 32, stream=stream0)",
    )
    source, _ = write_gpu_candidate(_capture(code), PROBLEM, "nvidia")
    assert (
        "triton_per_fused_amax_1[(8, 1, 1,)](torch.as_strided(buf1, (8, 32), (32, 1), 0), buf2, 8, 32"
        in source
    )


def test_library_calls_are_refused_by_name() -> None:
    code = CODE.replace(
        "            triton_tem_fused_addmm_relu_0.run(arg1_1, arg2_1, arg0_1, buf1, 1, 1, 1, stream=stream0)\n",
        "            buf9 = torch.ops.aten._scaled_dot_product_flash_attention.default(arg2_1, arg2_1, arg2_1)\n",
    )
    with pytest.raises(CaptureError, match=r"library op aten\._scaled_dot_product_flash_attention"):
        write_gpu_candidate(_capture(code), PROBLEM, "nvidia")


def test_cublas_fallbacks_become_kegens_triton_kernels() -> None:
    code = CODE.replace(
        "            triton_tem_fused_addmm_relu_0.run(arg1_1, arg2_1, arg0_1, buf1, 1, 1, 1, stream=stream0)\n",
        "            extern_kernels.mm(arg2_1, reinterpret_tensor(arg0_1, (64, 32), (1, 64), 0), out=buf1)\n",
    )
    source, info = write_gpu_candidate(_capture(code), PROBLEM, "nvidia")
    assert (
        info.extern == ["kegen_mm"]
        and "kegen_mm(x, torch.as_strided(p_fc_weight, (64, 32), (1, 64), 0)" in source
    )


@pytest.mark.skipif(_cuda(), reason="this machine has a CUDA device")
def test_without_cuda_the_draft_says_it_needs_one() -> None:
    with pytest.raises(TuneError, match="needs a CUDA device") as err:
        gpu.draft(PROBLEM, "nvidia")
    assert err.value.kind == "capture"


def test_bad_target_is_named() -> None:
    with pytest.raises(TuneError, match="'mtia' is not a GPU target"):
        gpu.draft(PROBLEM, "mtia")


def test_never_slower_than_compile() -> None:
    assert gpu.pick({"compile": 2.0, "draft": 3.0, "tuned": 2.5}) == "compile"
    assert gpu.pick({"compile": 2.0, "draft": 1.5, "tuned": 1.8}) == "draft"
    assert gpu.pick({"compile": 2.0, "draft": 1.5, "tuned": 1.0}) == "tuned"
    assert gpu.pick({"compile": 2.0, "draft": 2.0, "tuned": None}) == "compile"  # a tie keeps compile
    assert gpu.pick({"compile": None, "draft": 1.0, "tuned": 0.5}) == "compile"  # nothing to beat
    assert not gpu.beats_compile(None, 1.0) and gpu.beats_compile(0.9, 1.0)


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
def test_gpu_draft_on_the_device_is_correct_and_timed_against_compile(tmp_path) -> None:
    source = gpu.draft(PROBLEM, "nvidia")
    unfused = gpu.draft(PROBLEM, "nvidia", fused=False)
    (tmp_path / "draft.py").write_text(source)
    assert "triton_tem_" in source and "extern_kernels" not in source  # the GEMM is a Triton template
    # Inductor inlines pointwise producers at lowering: unfused only stops the scheduler's fusions
    assert source.count("@triton.jit") <= unfused.count("@triton.jit")
    t = gpu.measure_vs_compile(PROBLEM, source, "nvidia")
    assert t.ok, t.message
    assert t.draft_s and t.compile_s and t.eager_s
    u = gpu.measure_vs_compile(PROBLEM, unfused, "nvidia")
    assert u.ok, u.message


def _h200_capture(name: str, tmp_path: Path) -> tuple[GpuCapture, Path]:
    """The Capture of a shipped model's default variant whose output code and configs were recorded on
    the H200 (tests/tune/fixtures/h200, by tools/bench_tune_gpu.py --fixtures)."""
    import torch

    from kegen import compat
    from kegen.inductor.capture import _forward_args, _graph_inputs
    from kegen.inductor.decompositions import decomposition_table
    from kegen.tune.capture import load_model_file, write_variant_problems

    problem = write_variant_problems(load_model_file(f"kegen/models/{name}.py"), tmp_path)[0]
    module = load_problem(problem)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = tuple(module.get_inputs())
    ep = torch.export.export(model, inputs, strict=False).run_decompositions(decomposition_table())
    outs = [s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    cap = Capture(
        code=(FIXTURES / "h200" / f"{name}.output_code.txt").read_text(),
        inputs=_graph_inputs(ep),
        forward_args=_forward_args(model, len(inputs)),
        user_outputs=len(outs),
        single_output=compat.spec_is_single(ep.call_spec.out_spec, len(outs)),
        model_source_module=module,
    )
    configs = json.loads((FIXTURES / "h200" / f"{name}.configs.json").read_text())
    return GpuCapture(cap, configs, "NVIDIA H200"), problem


@pytest.mark.parametrize("name", ["dlrm", "encoder"])
def test_real_h200_output_translates_to_the_draft_the_device_made(name, tmp_path) -> None:
    gcap, problem = _h200_capture(name, tmp_path)
    source, info = write_gpu_candidate(gcap, problem, "nvidia")
    assert source == (FIXTURES / "h200" / f"{name}_draft.py").read_text()  # verified on the H200 there
    assert not info.extern and any(k.startswith("triton_tem_") for k in info.kernels)  # GEMMs: templates


@runs_gpu_templates
def test_real_h200_dlrm_draft_is_correct(tmp_path) -> None:
    """Run by the evaluator on cpu (Triton's interpreter; the encoder's erf is not interpreted there)."""
    from kegen.eval import EvalConfig, evaluate

    gcap, problem = _h200_capture("dlrm", tmp_path)
    source, _ = write_gpu_candidate(gcap, problem, "nvidia")
    r = evaluate(str(problem), source, config=EvalConfig(target="cpu", trials=1, timing_runs=1))
    assert r.ok, r.message
