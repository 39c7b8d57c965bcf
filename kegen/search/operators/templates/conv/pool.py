"""Max and average pooling (1-D and 2-D, NCL / NCHW) as one Triton kernel of contiguous row loads.

A strided window (kernel K, stride S) is read as ceil(K / S) shifted loads of each input row: load q
covers the columns `ow * S + q * S - P + m` for every output column `ow` and member `m < S` of a stride
group, one contiguous span of `OWB * S` columns reshaped to [C, OWB, S] and reduced over the members
that are taps (`q * S + m < K`). A stride of 2, the common one, splits the pairs instead of reducing
a third axis. Inductor (and a direct transcription) reads each of the K x K taps as its own stride-S
gather: mtia's DMA moves a strided tile element by element, a contiguous one as one block.

A program covers CB channels of one image and ROWS output rows; the launch sizes CB, OWB and ROWS at
run time from the shape (about PROGRAMS programs, a span of at most SPAN elements), so one draft
serves every shape a model calls it with. Max pooling accumulates in float32 (exact: a maximum of
values of the input's dtype), average pooling sums in float32 and divides by the window (or by its
taps inside the input where `count_include_pad=False`). Elementwise ops before the pool (Inductor fuses
a ReLU into it) run on each loaded tile (`PoolSpec.prologue`), padding still ignored after them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kegen.search.operators.templates import HEADER

MARKER = "kegen_pool_kernel"


@dataclass(frozen=True)
class PoolSpec:
    """One pooling op: `dims` 1 (NCL) or 2 (NCHW), window, stride and padding per spatial dim
    (height first; a 1-D pool has height 1), max or average, and average's divisor rule."""

    dims: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    is_max: bool
    count_include_pad: bool = True
    prologue: tuple[str, ...] = ()  # `tN = ...` lines over `v` (an input tile, float32): ops before the pool
    value: str = "v"  # the prologue's result


def spec_of(
    dims: int,
    is_max: bool,
    kernel_size: object,
    stride: object = None,
    padding: object = 0,
    dilation: object = 1,
    ceil_mode: object = False,
    return_indices: object = False,
    count_include_pad: object = True,
    divisor_override: object = None,
) -> PoolSpec | None:
    """The spec of a pooling op from its module attributes or function arguments (PyTorch's names and
    defaults; `stride` None or empty is the kernel), or None where the template does not cover it:
    dilation, ceil_mode, indices returned, a divisor override, padding over half the window."""

    def pair(v: object) -> tuple[int, int] | None:
        vals = list(v) if isinstance(v, list | tuple) else [v] * dims
        if len(vals) != dims or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
            return None
        return (1, *vals) if dims == 1 else (vals[0], vals[1])  # type: ignore[return-value]

    k = pair(kernel_size)
    s = pair(kernel_size if stride is None or stride == [] or stride == () else stride)
    p = pair(padding)
    d = pair(dilation)
    if k is None or s is None or p is None or d is None or dims not in (1, 2):
        return None
    if dims == 1:
        p = (0, p[1])
    if d != (1, 1) or ceil_mode or return_indices or divisor_override is not None:
        return None
    if min(k) < 1 or min(s) < 1 or min(p) < 0 or any(2 * pi > ki for pi, ki in zip(p, k, strict=True)):
        return None
    return PoolSpec(dims, k, s, p, bool(is_max), bool(count_include_pad))


_LOAD = """
@triton.jit
def kegen_pool_load(ptrs, mask, MAX: tl.constexpr):
    \"\"\"One tile of the pool's input; where `mask` is off, what the reduction ignores (-inf for max, 0
    for average).\"\"\"
    if MAX:
        return tl.load(ptrs, mask=mask, other=float("-inf"))
    return tl.load(ptrs, mask=mask, other=0.0)
"""
# the elementwise ops before the pool on each tile, in float32; padding ignored after them
_LOAD_PROLOGUE = """
@triton.jit
def kegen_pool_load(ptrs, mask, MAX: tl.constexpr):
    \"\"\"One tile of the pool's input after the elementwise ops before the pool, in float32; where `mask`
    is off, what the reduction ignores (-inf for max, 0 for average).\"\"\"
    v = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
{prologue}
    if MAX:
        return tl.where(mask, {value}, float("-inf"))
    return tl.where(mask, {value}, 0.0)
"""

_KERNEL = """
@triton.jit
def kegen_pool_kernel(x_ptr, y_ptr, C, H, W, OH, OW, KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr,
                      SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, MAX: tl.constexpr,
                      COUNT_PAD: tl.constexpr, GROUPED: tl.constexpr, ROWS: tl.constexpr, CB: tl.constexpr,
                      OWB: tl.constexpr):
    pid_nc = tl.program_id(0)
    pid_r = tl.program_id(1)
    n_cb = tl.cdiv(C, CB)
    n = pid_nc // n_cb
    c = (pid_nc % n_cb) * CB + tl.arange(0, CB)
    cmask = c < C
    ow = tl.arange(0, OWB)
    base = x_ptr + (n * C + c)[:, None].to(tl.int64) * (H * W)
    for r in range(ROWS):
        oh = pid_r * ROWS + r
        if MAX:
            acc = tl.full([CB, OWB], float("-inf"), tl.float32)
        else:
            acc = tl.zeros([CB, OWB], tl.float32)
        for kh in tl.static_range(KH):
            ih = oh * SH - PH + kh
            rmask = cmask[:, None] & (ih >= 0) & (ih < H) & (oh < OH)
            if GROUPED:  # ceil(KW / SW) contiguous loads, each [CB, OWB x SW] reduced over stride groups
                span = tl.arange(0, OWB * SW)
                member = span % SW  # a column's place in its stride group: tap q * SW + member
                for q in tl.static_range((KW + SW - 1) // SW):
                    col = span + (q * SW - PW)
                    taps = (col >= 0) & (col < W)
                    if not MAX or SW > 2:  # (max over a pair selects its taps by the split below)
                        taps = taps & (q * SW + member < KW)
                    v = kegen_pool_load(base + ih * W + col[None, :], rmask & taps[None, :], MAX)
                    if MAX:
                        if SW == 1:
                            acc = tl.maximum(acc, v.to(tl.float32))
                        elif SW == 2:  # a stride pair's two members split; the second only where a tap
                            v0, v1 = tl.split(tl.reshape(v, [CB, OWB, 2]))
                            if KW - q * SW >= 2:
                                acc = tl.maximum(acc, tl.maximum(v0, v1).to(tl.float32))
                            else:
                                acc = tl.maximum(acc, v0.to(tl.float32))
                        else:
                            acc = tl.maximum(acc, tl.max(tl.reshape(v, [CB, OWB, SW]), axis=2).to(tl.float32))
                    else:
                        acc += tl.sum(tl.reshape(v.to(tl.float32), [CB, OWB, SW]), axis=2)
            else:  # a stride that is not a power of two: one strided load per tap
                for kw in tl.static_range(KW):
                    col = ow * SW + (kw - PW)
                    tap = rmask & ((col >= 0) & (col < W))[None, :]
                    v = kegen_pool_load(base + ih * W + col[None, :], tap, MAX)
                    if MAX:
                        acc = tl.maximum(acc, v.to(tl.float32))
                    else:
                        acc += v.to(tl.float32)
        if not MAX:
            if COUNT_PAD:
                acc = acc / (KH * KW)
            else:  # the window's taps inside the input
                h0 = oh * SH - PH
                w0 = ow * SW - PW
                rows = tl.minimum(h0 + KH, H) - tl.maximum(h0, 0)
                cols = tl.minimum(w0 + KW, W) - tl.maximum(w0, 0)
                acc = acc / (rows * cols).to(tl.float32)[None, :]
        tl.store(y_ptr + (n * C + c)[:, None].to(tl.int64) * (OH * OW) + oh * OW + ow[None, :],
                 acc.to(y_ptr.dtype.element_ty), mask=cmask[:, None] & (ow[None, :] < OW) & (oh < OH))
"""

_FORWARD = """

PROGRAMS = 64  # about one program per PE
SPAN = 8192  # elements of one shifted row load (CB x OWB x stride)


def _pool(x):
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    H, W = ({hw})
    OH = (H + 2 * {ph} - {kh}) // {sh} + 1
    OW = (W + 2 * {pw} - {kw}) // {sw} + 1
    y = torch.empty(({out}), dtype=x.dtype, device=x.device)
    OWB = triton.next_power_of_2(OW)
    CB = min(32, triton.next_power_of_2(C))
    while CB > 1 and CB * OWB * {span_sw} > SPAN:
        CB //= 2
    blocks = N * triton.cdiv(C, CB)
    ROWS = triton.cdiv(OH, max(1, triton.cdiv(PROGRAMS, blocks)))
    grid = (blocks, triton.cdiv(OH, ROWS))
    kegen_pool_kernel[grid](x, y, C, H, W, OH, OW, KH={kh}, KW={kw}, SH={sh}, SW={sw}, PH={ph}, PW={pw},
                            MAX={is_max}, COUNT_PAD={count_pad}, GROUPED={grouped}, ROWS=ROWS, CB=CB, OWB=OWB)
    return y


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, {args}):
        return _pool({x})
"""


def pool(spec: PoolSpec, args: list[str], x: str) -> str:
    """The candidate module: ModelNew.forward(`args`) returns the pooling of the expression `x`."""
    (kh, kw), (sh, sw), (ph, pw) = spec.kernel, spec.stride, spec.padding
    hw = "x.shape[2], x.shape[3]" if spec.dims == 2 else "1, x.shape[2]"
    out = "N, C, OH, OW" if spec.dims == 2 else "N, C, OW"
    forward = _FORWARD.format(
        hw=hw,
        out=out,
        kh=kh,
        kw=kw,
        sh=sh,
        sw=sw,
        span_sw=sw if sw & (sw - 1) == 0 else 1,
        ph=ph,
        pw=pw,
        is_max=spec.is_max,
        count_pad=spec.count_include_pad,
        grouped=sw & (sw - 1) == 0,
        args=", ".join(args),
        x=x,
    )
    prologue = "".join(f"    {line}\n" for line in spec.prologue).rstrip("\n")
    load = _LOAD_PROLOGUE.format(prologue=prologue, value=spec.value) if spec.prologue else _LOAD
    return HEADER + load + _KERNEL + forward
