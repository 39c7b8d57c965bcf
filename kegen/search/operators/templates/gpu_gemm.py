"""GPU (Hopper) rewrites of a GEMM-class seed: persistent, tensor-descriptor (TMA) and split-K kernels.

Each rewrite keeps the seed kernel's name and parameters, its pre-loop batch statements and its
whole epilogue (bias, activation, store stay fused; `gpu_match`), and replaces its program mapping
and K loop:
- `persistent`: grid = number of SMs; each program walks the output tiles in grouped (GROUP_M
  swizzled) order; masks only on K (rows/cols clamped), none when K divides BLOCK_K.
- `tma`: the persistent kernel with A and B tiles through `tl.make_tensor_descriptor` (TMA on
  Hopper; needs `triton.set_allocator`; refused where this Triton has no device-side descriptors,
  the operands' contiguous stride is not known from the launch, or the seed has a batch axis).
- `split_k`: SPLIT_K programs per tile write float32 partial sums; a second kernel (the seed's
  name) sums them and runs the epilogue. For skinny shapes (few tiles, long K); no batch axis.
The tile configuration is module constants (`GPU_BLOCK_M`, ..., `GPU_STAGES`) so a config move
(`set_config`) or the block knobs re-tune a rewritten module without re-matching it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import triton.language as tl

from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.templates.gpu_launch import (
    Launch,
    find_launch,
    indent,
    insert_helpers,
    replace_lines,
    set_constants,
)
from kegen.search.operators.templates.gpu_match import GemmSeed, match_gemm

MARKER = "# kegen-gpu: gemm "
HAS_TMA = hasattr(tl, "make_tensor_descriptor")


@dataclass(frozen=True)
class GemmConfig:
    """One tile configuration of the GPU GEMM kernels."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    group_m: int = 8
    warps: int = 8
    stages: int = 3
    split_k: int = 1
    flatten: int = 0  # persistent tile loop flattened with the K loop (the epilogue overlaps the next loads)
    ws: int = 0  # warp-specialized tile loop (producer/consumer warps, where this Triton and GPU support it)
    auto: int = 0  # persistent/TMA: tiles chosen at launch by the GEMM's shape class (`_gemm_config`)

    @property
    def label(self) -> str:
        if self.auto:
            return "auto (by shape class)"
        s = f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} w{self.warps} s{self.stages}"
        s += f" split{self.split_k}" if self.split_k > 1 else ""
        return s + (" flat" if self.flatten else "") + (" ws" if self.ws else "")

    def constants(self) -> str:
        return (
            f"GPU_BLOCK_M = {self.block_m}\nGPU_BLOCK_N = {self.block_n}\nGPU_BLOCK_K = {self.block_k}\n"
            f"GPU_GROUP_M = {self.group_m}\nGPU_WARPS = {self.warps}\nGPU_STAGES = {self.stages}\n"
            f"GPU_SPLIT_K = {self.split_k}\nGPU_FLATTEN = {self.flatten}\nGPU_WS = {self.ws}\n"
            f"GPU_AUTO = {self.auto}\n"
        )


AUTO = GemmConfig(auto=1)


_SMS_HELPER = '''

_SMS: dict[str, int] = {}


def _num_sms(device):
    """Streaming multiprocessors of the device (programs of a persistent kernel); 4 off a GPU."""
    key = str(device)
    if key not in _SMS:
        cuda = torch.device(device).type == "cuda"
        _SMS[key] = torch.cuda.get_device_properties(device).multi_processor_count if cuda else 4
    return _SMS[key]
'''

_CONFIG_HELPER = '''

# shape classes measured on the H200 (docs/results/nvidia_configs_h200.md): the largest tile that still
# gives about one wave of programs; (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages, flatten with TMA)
_GEMM_CLASSES = (
    (128, 256, 64, 8, 8, 3, 1),  # 2048x2048, 4096x4096, 4096x512->2048, bmm 16x512x512
    (128, 128, 64, 8, 8, 4, 0),  # 2048x1024->1024
    (64, 128, 128, 8, 4, 4, 0),  # 1024x1024
    (64, 64, 64, 8, 4, 4, 0),  # 512x512 and smaller
)


def _gemm_config(m, n, batch, device, tma=False):
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages, flatten): the module's constants, or with
    GPU_AUTO the first shape class whose tiles fill about one wave of the device's SMs."""
    if not GPU_AUTO:
        return (GPU_BLOCK_M, GPU_BLOCK_N, GPU_BLOCK_K, GPU_GROUP_M, GPU_WARPS, GPU_STAGES, GPU_FLATTEN)
    wave = 0.9 * _num_sms(device)
    for cfg in _GEMM_CLASSES:
        if triton.cdiv(m, cfg[0]) * triton.cdiv(n, cfg[1]) * batch >= wave:
            break
    return cfg[:6] + ((cfg[6] if tma else 0),)
'''

_ALLOC_HELPER = '''

def _tma_scratch(size, alignment, stream):
    """Global scratch for device-side tensor descriptors."""
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


triton.set_allocator(_tma_scratch)
'''

_GROUPED = """_t = {tile} % _tiles
_group = _t // _in_group
_first_m = _group * GROUP_M
_group_m = tl.minimum(_num_pid_m - _first_m, GROUP_M)
_pid_m = _first_m + (_t % _in_group) % _group_m
_pid_n = (_t % _in_group) // _group_m"""

_TILE_SETUP = """_num_pid_m = tl.cdiv({m}, {bm})
_num_pid_n = tl.cdiv({n}, {bn})
_tiles = _num_pid_m * _num_pid_n
_in_group = GROUP_M * _num_pid_n
_rk = tl.arange(0, {bk})"""

_INDEXES = """{rows} = _pid_m * {bm} + tl.arange(0, {bm})
{cols} = _pid_n * {bn} + tl.arange(0, {bn})
_am = tl.max_contiguous(tl.multiple_of(tl.where({rows} < {m}, {rows}, 0), {bm}), {bm})
_bn = tl.max_contiguous(tl.multiple_of(tl.where({cols} < {n}, {cols}, 0), {bn}), {bn})
{acc} = tl.zeros(({bm}, {bn}), dtype=tl.float32)"""

_PTR_STEP = """_ks = _k * {bk} + _rk
if EVEN_K:
    _a = tl.load({a.base} + _am[:, None] * {a.s_outer} + _ks[None, :] * {a.s_k})
    _b = tl.load({b.base} + _ks[:, None] * {b.s_k} + _bn[None, :] * {b.s_outer})
else:
    _a = tl.load({a.base} + _am[:, None] * {a.s_outer} + _ks[None, :] * {a.s_k},
                 mask=_ks[None, :] < {k}, other=0.0)
    _b = tl.load({b.base} + _ks[:, None] * {b.s_k} + _bn[None, :] * {b.s_outer},
                 mask=_ks[:, None] < {k}, other=0.0)
{acc} = tl.dot(_a, _b, {acc})"""

_TMA_DESCS = {
    False: """_a_desc = tl.make_tensor_descriptor({a.base}, shape=[{m}, {k}], strides=[{a.s_outer}, {a.s_k}],
                                  block_shape=[{bm}, {bk}])
_b_desc = tl.make_tensor_descriptor({b.base}, shape=[{k}, {n}], strides=[{b.s_k}, {b.s_outer}],
                                  block_shape=[{bk}, {bn}])""",
    True: """_a_desc = tl.make_tensor_descriptor({a.base}, shape=[{m}, {k}], strides=[{a.s_outer}, {a.s_k}],
                                  block_shape=[{bm}, {bk}])
_b_desc = tl.make_tensor_descriptor({b.base}, shape=[{n}, {k}], strides=[{b.s_outer}, {b.s_k}],
                                  block_shape=[{bn}, {bk}])""",
}
_TMA_STEP = {
    False: """_a = _a_desc.load([_pid_m * {bm}, _k * {bk}])
_b = _b_desc.load([_k * {bk}, _pid_n * {bn}])
{acc} = tl.dot(_a, _b, {acc})""",
    True: """_a = _a_desc.load([_pid_m * {bm}, _k * {bk}])
_b = _b_desc.load([_pid_n * {bn}, _k * {bk}])
{acc} = tl.dot(_a, tl.trans(_b), {acc})""",
}


def _signature(g: GemmSeed, extra: str) -> str:
    args = ast.unparse(g.kernel.args)
    return f"@triton.jit\ndef {g.kernel.name}({args}, {extra}):\n"


def _fmt(g: GemmSeed, text: str) -> str:
    return text.format(
        m=g.m,
        n=g.n,
        k=g.k,
        bm=g.block_m,
        bn=g.block_n,
        bk=g.block_k,
        a=g.a,
        b=g.b,
        acc=g.acc,
        rows=g.rows,
        cols=g.cols,
    )


def _batch(g: GemmSeed) -> tuple[int, str] | None:
    if len(g.batch_axes) > 1:
        raise MutationError("more than one batch axis")
    return next(iter(g.batch_axes.items()), None)


def persistent_kernel(g: GemmSeed, tma_b_nk: bool | None = None) -> str:
    """The persistent kernel (pointer loads, or TMA descriptors when `tma_b_nk` is given: B's
    descriptor is (N, K) when True, (K, N) when False)."""
    batch = _batch(g)
    tma = tma_b_nk is not None
    setup = [_fmt(g, _TILE_SETUP)]
    if tma:
        setup.append(_fmt(g, _TMA_DESCS[bool(tma_b_nk)]))
    total = "_tiles * BATCH_EXTENT" if batch else "_tiles"
    body = []
    if batch:
        body.append(f"{batch[1]} = _tile // _tiles")
    body += [_GROUPED.format(tile="_tile"), *g.prelude, _fmt(g, _INDEXES)]
    step = _fmt(g, _TMA_STEP[bool(tma_b_nk)]) if tma else _fmt(g, _PTR_STEP)
    body += [f"for _k in range(0, tl.cdiv({g.k}, {g.block_k})):", indent(step, 4), *g.epilogue]
    lines = [
        *setup,
        f"for _tile in tl.range(tl.program_id(0), {total}, NUM_PROGS, flatten=FLATTEN, warp_specialize=WS):",
        indent("\n".join(body), 4),
    ]
    extra = (
        "BATCH_EXTENT=1, NUM_PROGS: tl.constexpr = 1, GROUP_M: tl.constexpr = 8, "
        "EVEN_K: tl.constexpr = False, FLATTEN: tl.constexpr = False, WS: tl.constexpr = False"
    )
    return _signature(g, extra) + indent("\n".join(lines), 4) + "\n"


def split_k_kernels(g: GemmSeed) -> str:
    """The partial-sum kernel (`<name>_partial`) and the reduce + epilogue kernel (`<name>`)."""
    if _batch(g):
        raise MutationError("split-K of a batched GEMM (the batch already fills the machine)")
    extra = "_ws_ptr, SPLIT_K: tl.constexpr = 1, GROUP_M: tl.constexpr = 8, EVEN_K: tl.constexpr = False"
    head = [_fmt(g, _TILE_SETUP), _GROUPED.format(tile="tl.program_id(0)"), *g.prelude, _fmt(g, _INDEXES)]
    ws = f"_ws_ptr + (_s * {g.m} + {g.rows})[:, None] * {g.n} + {g.cols}[None, :]"
    mask = f"_mask = ({g.rows}[:, None] < {g.m}) & ({g.cols}[None, :] < {g.n})"
    partial = head + [
        f"_k_tiles = tl.cdiv({g.k}, {g.block_k})",
        "_per = tl.cdiv(_k_tiles, SPLIT_K)",
        "_s = tl.program_id(1)",
        "for _k in range(_s * _per, tl.minimum(_s * _per + _per, _k_tiles)):",
        indent(_fmt(g, _PTR_STEP), 4),
        mask,
        f"tl.store({ws}, {g.acc}, mask=_mask)",
    ]
    reduce = head + [
        mask,
        "for _s in tl.static_range(SPLIT_K):",
        f"    {g.acc} += tl.load({ws}, mask=_mask, other=0.0)",
        *g.epilogue,
    ]
    part_sig = _signature(g, extra).replace(f"def {g.kernel.name}(", f"def {g.kernel.name}_partial(")
    return (
        part_sig
        + indent("\n".join(partial), 4)
        + "\n\n\n"
        + _signature(g, extra)
        + indent("\n".join(reduce), 4)
        + "\n"
    )


def _stride_index(src: str) -> tuple[str, int] | None:
    """(tensor, dim) of a launch argument `t.stride(d)`."""
    m = re.fullmatch(r"\s*([\w.]+)\.stride\((-?\d+)\)\s*", src)
    return (m.group(1), int(m.group(2))) if m else None


def _contiguous_last(launch: Launch, outer: str, inner: str) -> bool | None:
    """Whether `inner` is the contiguous stride and `outer` the leading one (True), the other way
    round (False), or unknown from the launch (None)."""
    if inner == "1":
        return True
    if outer == "1":
        return False
    o, i = _stride_index(launch.args.get(outer, "")), _stride_index(launch.args.get(inner, ""))
    if o is None or i is None or o[0] != i[0] or o[1] < 0 or i[1] < 0:
        return None
    return i[1] > o[1]


_CONSTANT_BLOCKS = ("GPU_BLOCK_M", "GPU_BLOCK_N", "GPU_BLOCK_K")
_CHOSEN_BLOCKS = ("_bm", "_bn", "_bk")


def _launch_kwargs(
    g: GemmSeed, launch: Launch, extra: dict[str, str], blocks: tuple[str, str, str] = _CONSTANT_BLOCKS
) -> str:
    """The seed's arguments by parameter, with the tile sizes (`blocks`) and `extra` keywords set."""
    args = dict(launch.args)
    args.update(dict(zip((g.block_m, g.block_n, g.block_k), blocks, strict=True)))
    pos = [args[p] for p in g.params if p not in g.constexprs and p in args]
    kws = [f"{p}={args[p]}" for p in g.params if p in g.constexprs and p in args]
    kws += [f"{k}={v}" for k, v in extra.items()]
    kws += [f"{k}={v}" for k, v in launch.options.items() if k not in ("num_warps", "num_stages")]
    return ", ".join(pos + kws)


def _check(g: GemmSeed, launch: Launch) -> None:
    missing = [p for p in (g.m, g.n, g.k) if p not in launch.args]
    if missing:
        raise MutationError(f"the launch passes no {', '.join(missing)} (sizes must be kernel parameters)")
    first = g.params[0]
    if first not in launch.args:
        raise MutationError("the launch passes no first operand")


def rewrite(source: str, variant: str, config: GemmConfig) -> str:
    """The module with its GEMM-class kernel rewritten as `variant` (persistent | tma | split_k)."""
    if MARKER in source:
        raise MutationError("already rewritten for the GPU (use a config move)")
    g = match_gemm(source)
    launch = find_launch(source, g.kernel.name)
    _check(g, launch)
    dev = f"{launch.args[g.params[0]]}.device"
    m, n, k = (f"({launch.args[x]})" for x in (g.m, g.n, g.k))
    tiles = f"triton.cdiv({m}, GPU_BLOCK_M) * triton.cdiv({n}, GPU_BLOCK_N)"
    even_k = f"{k} % GPU_BLOCK_K == 0"
    opts = {"num_warps": "GPU_WARPS", "num_stages": "GPU_STAGES"}
    helpers = [_SMS_HELPER]
    if variant in ("persistent", "tma"):
        tma_b_nk = None
        if variant == "tma":
            if not HAS_TMA:
                raise MutationError("this Triton has no tl.make_tensor_descriptor")
            if _batch(g) or g.a.base not in g.params or g.b.base not in g.params:
                raise MutationError("TMA rewrite needs unbatched operands addressed from their parameters")
            if _contiguous_last(launch, g.a.s_outer, g.a.s_k) is not True:
                raise MutationError("A's K stride is not known to be the contiguous one")
            b_k_last = _contiguous_last(launch, g.b.s_outer, g.b.s_k)
            if b_k_last is None:
                raise MutationError("B's contiguous stride is not known from the launch")
            tma_b_nk = b_k_last
            helpers.append(_ALLOC_HELPER)
        batch = _batch(g)
        ext = "1"
        if batch:
            found = launch.grid_extent(batch[0])
            if found is None:
                raise MutationError(f"the launch grid's axis {batch[0]} (the batch) is not readable")
            ext = found
        extra = {
            "NUM_PROGS": "_progs",
            "GROUP_M": "_gm",
            "EVEN_K": f"{k} % _bk == 0",
            "FLATTEN": "bool(_flat)",
            "WS": "bool(GPU_WS)",
            "num_warps": "_warps",
            "num_stages": "_stages",
        }
        if batch:
            extra["BATCH_EXTENT"] = ext
        kernels = persistent_kernel(g, tma_b_nk)
        helpers.append(_CONFIG_HELPER)
        call = [
            f"_bm, _bn, _bk, _gm, _warps, _stages, _flat = _gemm_config({m}, {n}, {ext}, {dev}, "
            f"tma={variant == 'tma'})",
            f"_progs = min(_num_sms({dev}), triton.cdiv({m}, _bm) * triton.cdiv({n}, _bn) * ({ext}))",
            f"{g.kernel.name}[(_progs,)]({_launch_kwargs(g, launch, extra, _CHOSEN_BLOCKS)})",
        ]
    elif variant == "split_k":
        kernels = split_k_kernels(g)
        part = {"SPLIT_K": "GPU_SPLIT_K", "GROUP_M": "GPU_GROUP_M", "EVEN_K": even_k, **opts}
        red = {"SPLIT_K": "GPU_SPLIT_K", "GROUP_M": "GPU_GROUP_M", "num_warps": "4"}
        call = [
            f"_ws = torch.empty((GPU_SPLIT_K, {m}, {n}), dtype=torch.float32, device={dev})",
            f"{g.kernel.name}_partial[({tiles}, GPU_SPLIT_K)]"
            f"({_launch_kwargs(g, launch, part)}, _ws_ptr=_ws)",
            f"{g.kernel.name}[({tiles},)]({_launch_kwargs(g, launch, red)}, _ws_ptr=_ws)",
        ]
    else:
        raise ValueError(f"unknown GEMM variant {variant!r} (persistent | tma | split_k)")
    out = replace_lines(
        source,
        [
            (launch.first_line, launch.last_line, indent("\n".join(call), launch.col)),
            (launch.kernel_first, launch.kernel_last, kernels.rstrip("\n")),
        ],
    )
    return insert_helpers(out, MARKER + variant + "\n" + config.constants() + "".join(helpers))


def set_config(source: str, config: GemmConfig) -> str:
    """A rewritten module with its tile configuration replaced."""
    return set_constants(source, MARKER, config.constants(), "GEMM")


def variant_of(source: str) -> str | None:
    """The GEMM rewrite a module carries (persistent | tma | split_k), or None."""
    m = re.search(re.escape(MARKER) + r"(\w+)", source)
    return m.group(1) if m else None
