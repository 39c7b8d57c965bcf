"""The GPU (nvidia) rewrites, checked numerically in Triton's interpreter on small production shapes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.gpu_moves import gpu_mutations
from kegen.search.operators.templates import gpu_attention, gpu_conv, gpu_gemm
from kegen.search.operators.templates.gemm import LinearStage, bmm, linear_chain
from kegen.search.operators.templates.gpu_attention import AttentionConfig
from kegen.search.operators.templates.gpu_conv import ConvConfig
from kegen.search.operators.templates.gpu_gemm import GemmConfig
from kegen.search.operators.templates.gpu_match import match_gemm
from tests.triton_interpreter import TRITON, runs_gpu_templates

SUITE = Path(__file__).resolve().parents[2] / "kegen" / "suites" / "production"
HELPER = Path(__file__).with_name("gpu_interp.py")
SMALL = GemmConfig(32, 32, 32, 2, 4, 2, split_k=3)
SCALE = "0.21875"  # ragged: 112-wide GEMMs, 32-wide tiles, K not a multiple of BLOCK_K


def _seed(problem: str) -> str:
    return (SUITE / problem / "seed.py").read_text()


def _run(mode: str, problem: str, candidate: str, tmp: Path, atol: float = 2e-2, scale: str = SCALE) -> None:
    """The candidate checked in a fresh process with Triton's interpreter (see gpu_interp.py)."""
    if TRITON < (3, 7):
        pytest.skip(
            "Triton 3.6's interpreter cannot run GPU GEMM templates (tl.cdiv as a range bound); GPUs can"
        )
    path = tmp / f"cand_{len(list(tmp.iterdir()))}.py"
    path.write_text(candidate)
    env = {**os.environ, "TRITON_INTERPRET": "1", "KEGEN_SUITE_SCALE": scale}
    got = subprocess.run(
        [sys.executable, str(HELPER), mode, problem, str(path), str(atol)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0 and got.stdout.strip().endswith("ok"), got.stderr[-3000:]


def _check(problem: str, candidate: str, tmp: Path, atol: float = 2e-2, scale: str = SCALE) -> None:
    _run("check", problem, candidate, tmp, atol, scale)


@pytest.mark.parametrize("variant", ["persistent", "tma", "split_k"])
def test_gemm_variants_are_exact_on_ragged_shapes(variant: str, tmp_path: Path) -> None:
    out = gpu_gemm.rewrite(_seed("gemm_fp16_512"), variant, SMALL)
    assert gpu_gemm.variant_of(out) == variant
    if variant == "tma":
        assert "tl.make_tensor_descriptor" in out and "triton.set_allocator" in out
    _check("gemm_fp16_512", out, tmp_path)


@pytest.mark.parametrize("variant", ["persistent", "tma", "split_k"])
def test_linear_epilogue_stays_fused(variant: str, tmp_path: Path) -> None:
    """Bias + ReLU run in the rewritten kernel (split-K: in the reduce kernel); W is (N, K)."""
    out = gpu_gemm.rewrite(_seed("linear_bias_relu_fp16"), variant, SMALL)
    assert out.count("tl.maximum") == _seed("linear_bias_relu_fp16").count("tl.maximum") > 0
    if variant == "tma":
        assert "tl.trans(_b)" in out  # W read as (N, K) tiles through its descriptor
    _check("linear_bias_relu_fp16", out, tmp_path)


def test_batched_gemm_is_persistent_over_batch_and_tiles(tmp_path: Path) -> None:
    seed = _seed("bmm_fp16")
    assert match_gemm(seed).batch_axes == {2: "batch"}
    _check("bmm_fp16", gpu_gemm.rewrite(seed, "persistent", SMALL), tmp_path)
    for variant in ("tma", "split_k"):
        with pytest.raises(MutationError):
            gpu_gemm.rewrite(seed, variant, SMALL)


def test_config_moves_retune_a_rewrite(tmp_path: Path) -> None:
    out = gpu_gemm.rewrite(_seed("gemm_fp16_512"), "persistent", SMALL)
    with pytest.raises(MutationError):
        gpu_gemm.rewrite(out, "persistent", SMALL)  # not rewritten twice
    moves = gpu_mutations(out)
    assert moves and {m.family for m in moves} == {"gpu_gemm_config"}
    bigger = gpu_gemm.set_config(out, GemmConfig(64, 32, 32, 2, 4, 2))
    assert "GPU_BLOCK_M = 64" in bigger and "GPU_BLOCK_M = 32" not in bigger
    _check("gemm_fp16_512", bigger, tmp_path)
    flat = gpu_gemm.set_config(out, GemmConfig(32, 32, 32, 2, 4, 2, flatten=1))
    assert "GPU_FLATTEN = 1" in flat and "flatten=FLATTEN" in flat
    _check("gemm_fp16_512", flat, tmp_path)


@pytest.mark.parametrize(
    ("m", "n", "batch", "tiles"),
    [
        (2048, 2048, 1, (128, 256, 64)),
        (4096, 2048, 1, (128, 256, 64)),
        (512, 512, 16, (128, 256, 64)),
        (2048, 1024, 1, (128, 128, 64)),
        (1024, 1024, 1, (64, 128, 128)),
        (512, 512, 1, (64, 64, 64)),
        (100, 30, 1, (64, 64, 64)),
    ],
)
def test_auto_config_picks_the_measured_shape_class(
    m: int, n: int, batch: int, tiles: tuple[int, int, int]
) -> None:
    """On an H200 (132 SMs) the auto rewrite launches the tiles the sweeps measured best per shape."""
    src = gpu_gemm.rewrite(_seed("gemm_fp16_512"), "persistent", gpu_gemm.AUTO)
    helper = src[src.index("_GEMM_CLASSES") : src.index("class ModelNew")]
    scope: dict[str, Any] = {"triton": __import__("triton"), "GPU_AUTO": 1, "_num_sms": lambda device: 132}
    exec(helper.split("\n@triton.jit")[0], scope)
    cfg = scope["_gemm_config"](m, n, batch, "cuda", tma=True)
    assert cfg[:3] == tiles and cfg[6] == (1 if tiles[:2] == (128, 256) else 0)
    assert scope["_gemm_config"](m, n, batch, "cuda")[6] == 0  # flattened loops only with TMA loads
    scope["GPU_AUTO"] = 0
    scope.update(GPU_BLOCK_M=32, GPU_BLOCK_N=32, GPU_BLOCK_K=32, GPU_GROUP_M=2, GPU_WARPS=4, GPU_STAGES=2)
    scope["GPU_FLATTEN"] = 0
    assert scope["_gemm_config"](m, n, batch, "cuda") == (32, 32, 32, 2, 4, 2, 0)


@pytest.mark.parametrize(
    ("problem", "variant"),
    [("gemm_fp16_512", "persistent"), ("bmm_fp16", "persistent"), ("linear_bias_relu_fp16", "tma")],
)
def test_auto_rewrite_is_exact(problem: str, variant: str, tmp_path: Path) -> None:
    out = gpu_gemm.rewrite(_seed(problem), variant, gpu_gemm.AUTO)
    assert "GPU_AUTO = 1" in out and "_gemm_config(" in out
    _check(problem, out, tmp_path)
    fixed = gpu_gemm.set_config(out, SMALL)  # a config move pins the tiles
    assert "GPU_AUTO = 0" in fixed
    _check(problem, fixed, tmp_path)


def test_moves_per_seed_class() -> None:
    families = {p: {m.family for m in gpu_mutations(_seed(p))} for p in ("gemm_fp16_2048", "bmm_fp16")}
    assert families["gemm_fp16_2048"] >= {"gpu_gemm_persistent", "gpu_gemm_split_k"}
    assert families["bmm_fp16"] == {"gpu_gemm_persistent"}
    assert {m.family for m in gpu_mutations(_seed("attention_fwd_fp16"))} == {"gpu_attention"}
    assert {m.family for m in gpu_mutations(_seed("conv2d_fp16"))} == {"gpu_conv"}
    assert gpu_mutations(_seed("softmax_fp32")) == [] and gpu_mutations(_seed("layer_norm_bf16")) == []
    stage = LinearStage("self.w", "self.b", ("t0 = tl.maximum(acc, 0.0)",), "t0")
    assert gpu_mutations(linear_chain([stage], ["x"], "x")) == []  # launched through _linear(kernel, ...)
    assert {m.family for m in gpu_mutations(bmm(["a", "b"], "a", "b"))} == {"gpu_gemm_persistent"}
    for m in gpu_mutations(_seed("gemm_fp16_512")):
        compile(m.apply(_seed("gemm_fp16_512")), m.name, "exec")


@pytest.mark.slow
def test_attention_unmasked_ragged_sequence(tmp_path: Path) -> None:
    out = gpu_attention.rewrite(_seed("attention_fwd_fp16"), AttentionConfig(32, 64, 4, 2))
    assert "CAUSAL=False" in out and "tl.math.exp2" in out
    _check("attention_fwd_fp16", out, tmp_path, atol=1e-2, scale="0.15625")  # seq 160: ragged blocks
    even = gpu_attention.set_config(out, AttentionConfig(32, 32, 4, 2))  # 160 = 5 x 32: no masks
    _check("attention_fwd_fp16", even, tmp_path, atol=1e-2, scale="0.15625")
    tma = gpu_attention.set_config(out, AttentionConfig(32, 32, 4, 2, tma=1))  # descriptors on even blocks
    assert "ATTN_TMA = 1" in tma
    _check("attention_fwd_fp16", tma, tmp_path, atol=1e-2, scale="0.15625")
    ragged_tma = gpu_attention.set_config(out, AttentionConfig(32, 64, 4, 2, tma=1))  # falls back to masks
    _check("attention_fwd_fp16", ragged_tma, tmp_path, atol=1e-2, scale="0.15625")


def test_attention_causal_variant(tmp_path: Path) -> None:
    seed = _seed("attention_fwd_fp16").replace(
        '        s = tl.where(keys[None, :] < seq, s, float("-inf"))\n',
        '        s = tl.where((keys[None, :] < seq) & (offs_m[:, None] >= keys[None, :]), s, float("-inf"))\n',
    )
    out = gpu_attention.rewrite(seed, AttentionConfig(32, 16, 4, 2))
    assert "CAUSAL=True" in out
    _run("causal", "-", out, tmp_path, atol=1e-2)


@pytest.mark.slow
def test_attention_on_a_fixed_row_reference(tmp_path: Path) -> None:
    """`fixed`: every key block exponentiated against the first block's row max; exact on ragged,
    even, TMA and causal tiles, and on scores that outgrow the reference (the online fallback)."""
    out = gpu_attention.rewrite(_seed("attention_fwd_fp16"), AttentionConfig(32, 64, 4, 2, fixed=1))
    assert "ATTN_FIXED = 1" in out and "FIXED=bool(ATTN_FIXED)" in out
    _check("attention_fwd_fp16", out, tmp_path, atol=1e-2, scale="0.15625")  # seq 160: ragged blocks
    for config in (AttentionConfig(32, 32, 4, 2, fixed=1), AttentionConfig(32, 32, 4, 2, tma=1, fixed=1)):
        _check(
            "attention_fwd_fp16", gpu_attention.set_config(out, config), tmp_path, atol=1e-2, scale="0.15625"
        )
    _run("ramp", "-", out, tmp_path, atol=1e-2)  # 96 keys, scores 0..48: p would reach 2^46
    causal = _seed("attention_fwd_fp16").replace(
        '        s = tl.where(keys[None, :] < seq, s, float("-inf"))\n',
        '        s = tl.where((keys[None, :] < seq) & (offs_m[:, None] >= keys[None, :]), s, float("-inf"))\n',
    )
    _run(
        "causal",
        "-",
        gpu_attention.rewrite(causal, AttentionConfig(32, 16, 4, 2, fixed=1)),
        tmp_path,
        atol=1e-2,
    )


@pytest.mark.parametrize("problem", ["conv1d_fp16", "conv2d_fp16"])
def test_conv_implicit_gemm(problem: str, tmp_path: Path) -> None:
    out = gpu_conv.rewrite(_seed(problem), ConvConfig(32, 32, 32, 2, 4, 2))  # C_in 16 < 32: masked K
    assert "_packed_weight" in out
    _check(problem, out, tmp_path)


def test_conv_weights_repacked_when_changed(tmp_path: Path) -> None:
    out = gpu_conv.rewrite(_seed("conv2d_fp16"), ConvConfig(32, 32, 16, 2, 4, 2))
    _run("repack", "conv2d_fp16", out, tmp_path)


def test_conv_refuses_grouped_convolution() -> None:
    seed = _seed("conv2d_fp16").replace("padding=kernel_size // 2)", "padding=kernel_size // 2, groups=2)")
    with pytest.raises(MutationError, match="groups"):
        gpu_conv.rewrite(seed, ConvConfig())


@runs_gpu_templates
def test_evaluator_accepts_a_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through kegen's evaluator (target cpu: Triton's interpreter), a fresh process."""
    from kegen.eval import EvalConfig, evaluate

    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.125")
    src = gpu_gemm.rewrite(_seed("linear_bias_relu_fp16"), "persistent", SMALL)
    cfg: dict[str, Any] = {"trials": 1, "timing_runs": 1, "warmup_ms": 1, "rep_ms": 1}
    r = evaluate(
        SUITE / "linear_bias_relu_fp16" / "problem.py",
        src,
        config=EvalConfig(target="cpu", compile_baseline=False, fresh_process=True, **cfg),
    )
    assert r.status.value == "ok", r.message


def _ctx(problem: str, target: str) -> Any:
    from kegen.search.operators.context import Diagnosis, OperatorContext, ProblemInfo
    from kegen.search.store import Node, code_hash

    code = _seed(problem)
    info = ProblemInfo(path=SUITE / problem / "problem.py", source="", op_class="gemm", target=target)
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=code, code_hash=code_hash(code), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target=target, island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    return OperatorContext(
        problem=info, parent=node, parent_code=code, parent_eval=None, phase="optimize",
        diagnosis=Diagnosis(bound="compute"), failure=None, attempts=[], knowledge=[],
    )  # fmt: skip


def test_offline_operator_proposes_rewrites_for_nvidia_only() -> None:
    from kegen.search.config import OperatorConfig
    from kegen.search.operators.offline import OfflineOperator

    op = OfflineOperator(OperatorConfig(), seed=0)
    nvidia = {m.family for m in op.candidates(_ctx("conv2d_fp16", "nvidia"))}
    assert "gpu_conv" in nvidia
    assert not any(
        f.startswith("gpu_") for f in (m.family for m in op.candidates(_ctx("conv2d_fp16", "mtia")))
    )
    first = op.propose(_ctx("gemm_fp16_2048", "nvidia"))  # a whole-kernel rewrite outranks knob steps
    assert first.code is not None and str(first.meta["family"]).startswith("gpu_gemm_")
