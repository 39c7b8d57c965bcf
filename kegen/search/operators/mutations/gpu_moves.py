"""The offline operator's moves for GPU targets (nvidia, Hopper): whole-kernel rewrites and config sweeps.

- GEMM class (matmul, linear + bias + activation, bmm): the seed rewritten as a persistent kernel
  (grouped tile order, grid = SMs), the same with TMA tensor descriptors, or split-K (partial sums,
  then the epilogue), each in a few tile configurations (`templates.gpu_gemm`). The first of each
  persistent/TMA list is `auto`: the tiles are chosen at launch by the GEMM's shape class (the
  largest measured class whose tiles fill about one wave of SMs), so one rewrite serves every shape
  a model calls it with and the first evaluation is near the best fixed configuration.
- attention: a FlashAttention-style forward (exp2, scale folded into Q, pipelined K/V tiles;
  `templates.gpu_attention`).
- convolution: an implicit GEMM over the NCHW/NCL activations with pre-packed weights
  (`templates.gpu_conv`).
A rewritten module offers config moves instead: the other configurations of its family, a few per
step as the operator ranks them. Each list is ordered by how often the configuration won on the
H200 for the production shapes (docs/results/nvidia_moves_h200.md and the per-shape sweeps of
tools/sweep_nvidia_configs.py, docs/results/nvidia_configs_h200.md): the priors decrease along it.
Every launch that passes `num_warps` / `num_stages` as literals (torch.compile's GPU draft,
hand-written seeds) gets one step each way of each (`launch_config_mutations`).
Flattened tile loops pay only with TMA loads (pointer loads: 2-5x slower); warp specialization
does not compile with pointer loads on Hopper (Triton 3.6) and gains nothing with TMA, so neither
is in the pointer lists.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kegen.search.operators.dot_precision import keep_exact_dots
from kegen.search.operators.mutations.base import Mutation, MutationError, jit_functions
from kegen.search.operators.mutations.knobs import kernels_with_load_loops
from kegen.search.operators.mutations.launches import launches
from kegen.search.operators.templates import gpu_attention, gpu_conv, gpu_gemm
from kegen.search.operators.templates.gpu_attention import AttentionConfig
from kegen.search.operators.templates.gpu_conv import ConvConfig
from kegen.search.operators.templates.gpu_gemm import GemmConfig
from kegen.search.operators.templates.gpu_launch import find_launch
from kegen.search.operators.templates.gpu_match import match_gemm

REWRITE_PRIOR = 2.5  # a whole-kernel rewrite outranks a tile or knob step on a plain seed
CONFIG_PRIOR = 1.4
STEP = 0.05  # prior lost per place along a configuration list

GEMM_CONFIGS: dict[str, tuple[GemmConfig, ...]] = {
    "persistent": (
        gpu_gemm.AUTO,  # tiles by shape class at launch (the classes below, measured per shape)
        GemmConfig(128, 256, 64, 8, 8, 3),  # 2048² (29.7 us), linear 4096x512->2048
        GemmConfig(64, 128, 128, 8, 4, 4),  # 1024³ (9.2 us)
        GemmConfig(128, 256, 64, 8, 8, 4),  # bmm 16x512³ (14.1 us)
        GemmConfig(128, 128, 64, 8, 8, 4),  # linear 2048x1024->1024
        GemmConfig(64, 64, 64, 8, 4, 4),  # 512³
        GemmConfig(128, 256, 64, 16, 8, 3),
        GemmConfig(64, 128, 128, 8, 4, 3),
        GemmConfig(64, 128, 64, 8, 4, 5),
        GemmConfig(128, 128, 64, 8, 4, 4),
    ),
    "tma": (
        gpu_gemm.AUTO,
        GemmConfig(128, 256, 64, 8, 8, 3, flatten=1),  # 4096² (184.8 us), 2048² (29.9)
        GemmConfig(128, 256, 64, 8, 8, 4),
        GemmConfig(128, 128, 64, 8, 8, 4),
        GemmConfig(128, 256, 64, 8, 8, 3),
        GemmConfig(64, 128, 128, 8, 4, 3),
    ),
    "split_k": (
        GemmConfig(64, 64, 64, 8, 4, 4, split_k=4),
        GemmConfig(128, 128, 64, 8, 8, 3, split_k=2),
    ),
}
ATTENTION_CONFIGS = (
    # 2x8x1024x64 fp16 on an H100, two sweeps (tools/bench_gpu_attention_configs.py; SDPA 18.1-18.3 us):
    AttentionConfig(64, 64, 4, 3, fixed=1),  # fixed row reference (D88): 17.4-18.2 us
    AttentionConfig(64, 64, 4, 4, fixed=1),  # 18.1 us
    AttentionConfig(64, 128, 4, 3),  # the best online softmax: 19.2-20.0 us (18.7 us on an H200)
    AttentionConfig(64, 32, 4, 4, fixed=1),  # 19.0-19.3 us
    AttentionConfig(128, 64, 8, 3, fixed=1),  # 19.5-20.0 us
    AttentionConfig(128, 128, 8, 3),
    AttentionConfig(64, 128, 4, 3, tma=1),  # TMA loads: 18-30% slower at this shape (kept for others)
)
CONV_CONFIGS = (
    ConvConfig(128, 128, 32, 8, 4, 4),  # conv1d 8x128->256x2048
    ConvConfig(64, 128, 64, 8, 4, 4),  # conv2d 8x64->128x56x56
    ConvConfig(128, 64, 64, 8, 4, 4),
    ConvConfig(128, 128, 64, 8, 8, 3),
)
GEMM_REMEDIES = {
    "persistent": ("overlap", "parallelism", "fewer_launches"),
    "tma": ("overlap", "fewer_bytes", "bigger_commands"),
    "split_k": ("parallelism", "balance"),
}


def _move(
    name: str,
    family: str,
    description: str,
    apply: Callable[[str], str],
    prior: float,
    remedies: Sequence[str],
) -> Mutation:
    def exact_where_asked(source: str) -> str:  # a rewrite keeps the source's exact float32 dots
        return keep_exact_dots(source, apply(source))

    return Mutation(
        name,
        family,
        description,
        exact_where_asked,
        helps=("compute", "latency"),
        prior=prior,
        remedies=tuple(remedies),
    )


def _bind(fn: Callable[[str, Any], str], config: Any) -> Callable[[str], str]:
    """`fn(source, config)` as a one-argument rewrite."""

    def apply(source: str) -> str:
        return fn(source, config)

    return apply


def _variant_rewrite(variant: str) -> Callable[[str, GemmConfig], str]:
    """The GEMM rewrite of one variant, taking (source, config)."""

    def rewrite(source: str, config: GemmConfig) -> str:
        return gpu_gemm.rewrite(source, variant, config)

    return rewrite


def _gemm_moves(source: str) -> list[Mutation]:
    variant = gpu_gemm.variant_of(source)
    if variant is not None:
        return [
            _move(
                f"gpu_gemm_config={c.label}",
                "gpu_gemm_config",
                f"GPU GEMM ({variant}): tiles {c.label}",
                _bind(gpu_gemm.set_config, c),
                CONFIG_PRIOR - STEP * i,
                GEMM_REMEDIES[variant],
            )
            for i, c in enumerate(GEMM_CONFIGS[variant])
        ]
    try:
        g = match_gemm(source)
        find_launch(source, g.kernel.name)  # launched by name (not through a helper's parameter)
    except MutationError:
        return []
    out = []
    for variant, configs in GEMM_CONFIGS.items():
        if variant == "tma" and not gpu_gemm.HAS_TMA:
            continue
        if variant != "persistent" and g.batch_axes:
            continue
        for i, c in enumerate(configs):
            out.append(
                _move(
                    f"gpu_gemm_{variant}={c.label}@{g.kernel.name}",
                    f"gpu_gemm_{variant}",
                    f"rewrite {g.kernel.name} as a {variant.replace('_', '-')} GPU GEMM, tiles {c.label}",
                    _bind(_variant_rewrite(variant), c),
                    REWRITE_PRIOR - STEP * i - (0.2 if variant == "split_k" else 0.0),
                    GEMM_REMEDIES[variant],
                )
            )
    return out


def _family_moves(
    source: str,
    marker: str,
    family: str,
    what: str,
    configs: Sequence[Any],
    rewrite: Callable[[str, Any], str],
    set_config: Callable[[str, Any], str],
) -> list[Mutation]:
    remedies = ("overlap", "cheaper_math", "fewer_bytes")
    if marker in source:
        return [
            _move(
                f"{family}_config={c.label}",
                f"{family}_config",
                f"GPU {what}: sizes {c.label}",
                _bind(set_config, c),
                CONFIG_PRIOR - STEP * i,
                remedies,
            )
            for i, c in enumerate(configs)
        ]
    try:
        rewrite(source, configs[0])
    except MutationError:
        return []
    return [
        _move(
            f"{family}={c.label}",
            family,
            f"rewrite as the GPU {what}, sizes {c.label}",
            _bind(rewrite, c),
            REWRITE_PRIOR - STEP * i,
            remedies,
        )
        for i, c in enumerate(configs)
    ]


WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5, 6)
LAUNCH_PRIOR = 1.1  # below the rewrites and their configurations: the moves left where none applies


def launch_config_mutations(source: str) -> list[Mutation]:
    """`num_warps` / `num_stages` one step up and down at every launch of the module's own kernels that
    passes them as literals: torch.compile's GPU draft carries the values Inductor's autotuning chose
    on one GPU, and its block sizes are tied to literal grids, so these two are what a search can
    tune there. `num_stages` only for kernels with a loop that loads (nothing else to pipeline)."""
    tree = ast.parse(source)
    kernels = {fn.name for fn in jit_functions(tree)}
    pipelined = kernels_with_load_loops(source)
    muts: list[Mutation] = []
    for name, idx, call in launches(tree):
        if name not in kernels:
            continue
        for kw in call.keywords:
            if kw.arg not in ("num_warps", "num_stages") or not isinstance(kw.value, ast.Constant):
                continue
            current = kw.value.value
            if type(current) is not int or (kw.arg == "num_stages" and name not in pipelined):
                continue
            values = WARPS if kw.arg == "num_warps" else STAGES
            below = [v for v in values if v < current][-1:]
            above = [v for v in values if v > current][:1]
            muts += [
                Mutation(
                    name=f"{kw.arg}={v}@{name}#{idx}",
                    family=f"gpu_{kw.arg}",
                    description=f"launch {name} with {kw.arg}={v} (was {current})",
                    apply=partial(_set_launch_literal, kernel=name, index=idx, arg=kw.arg, value=v),
                    helps=("latency", "compute") if kw.arg == "num_warps" else ("memory",),
                    prior=LAUNCH_PRIOR,
                    kernel=name,
                )
                for v in below + above
            ]
    return muts


def _set_launch_literal(source: str, kernel: str, index: int, arg: str, value: int) -> str:
    """`source` with the literal keyword `arg` of the `index`-th launch of `kernel` set to `value`, the
    rest of the text as it was."""
    for name, idx, call in launches(ast.parse(source)):
        if (name, idx) != (kernel, index):
            continue
        kw = next((k for k in call.keywords if k.arg == arg and isinstance(k.value, ast.Constant)), None)
        if kw is None or kw.value.end_lineno != kw.value.lineno or kw.value.end_col_offset is None:
            break
        lines = source.split("\n")
        row = lines[kw.value.lineno - 1].encode()
        row = row[: kw.value.col_offset] + str(value).encode() + row[kw.value.end_col_offset :]
        lines[kw.value.lineno - 1] = row.decode()
        return "\n".join(lines)
    raise MutationError(f"no literal {arg} at launch {index} of {kernel}")


def gpu_mutations(source: str) -> list[Mutation]:
    """Every GPU rewrite or config move that applies to `source`, and the launch-config moves of its
    kernels launched with literal `num_warps` / `num_stages` (empty when none applies)."""
    return _rewrite_moves(source) + launch_config_mutations(source)


def _rewrite_moves(source: str) -> list[Mutation]:
    attention = _family_moves(
        source,
        gpu_attention.MARKER,
        "gpu_attention",
        "FlashAttention-style forward",
        ATTENTION_CONFIGS,
        gpu_attention.rewrite,
        gpu_attention.set_config,
    )
    conv = _family_moves(
        source,
        gpu_conv.MARKER,
        "gpu_conv",
        "implicit-GEMM convolution",
        CONV_CONFIGS,
        gpu_conv.rewrite,
        gpu_conv.set_config,
    )
    if attention or conv:
        return attention + conv
    return _gemm_moves(source)
