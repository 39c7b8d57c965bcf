"""Triton template for linear layers with packed 4-bit weights: `y = epilogue(x @ (s * (q - z)).T)`.

The integer weight q (N, K) is stored E values to a word (two to a byte, eight to an int32) along K,
either interleaved (word w holds elements w*E .. w*E + E-1) or in planes (word w holds elements
w, w + K/E, ...); the nibble of each element within its word is fixed by `slots`. Each K block loads
its words once and, for each of the E element positions, the activations of that position (an
affine load: stride E along K, or a contiguous run of one plane) and the position's nibbles, so the
dot runs on exact small integers converted to the activations' dtype (exact in fp16/bf16/fp32 when
the zero point is an integer). Scales (one per output channel, or per output channel and group of G
input channels) multiply the fp32 dot of each K block once; the zero point is a constant, a tensor
of the scales' shape, or such a tensor packed E to a word along N (GPTQ's `qzeros`, with its +1).
The float weight the reference builds never exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kegen.search.operators.templates import HEADER
from kegen.search.operators.templates.gemm import PROGRAM_TILE, consts, epilogue_args, epilogue_loads, indent
from kegen.search.operators.templates.layout import model_class


@dataclass(frozen=True)
class Packing:
    """How q (N, K) sits in its packed tensor: `per_word` 4-bit values a word, `planes` (else
    interleaved), `slots[j]` the nibble (from the low end) of a word's j-th element, `signed` values
    sign-extended from 4 bits, `k_major` the packed tensor stored (K / E, N) (else (N, K / E))."""

    per_word: int
    planes: bool
    slots: tuple[int, ...]
    signed: bool
    k_major: bool
    unsigned_words: bool = False  # uint8 words: a shift right brings in zeros
    along_n: bool = False  # values packed along N (AWQ's qweight: (K, N / E)); k_major then means (K, N / E)


@dataclass(frozen=True)
class Operand:
    """A scale or zero-point tensor: its forward-time expression and `layout`;
    `packed` > 1: that many 4-bit values a word along N (nibble of element j: `slots[j]`), plus `offset`;
    `divide`: a scale the weight is divided by."""

    expr: str
    layout: str = "n_major"  # n_major (N, G) | g_major (G, N) | row (N,): every group | scalar
    packed: int = 1
    slots: tuple[int, ...] = ()
    offset: int = 0
    divide: bool = False  # a scale the weight is divided by
    integer: bool = False  # integer values (a zero point subtracted in the integers, before the conversion)


@dataclass(frozen=True)
class _KernelParts:
    """What both kernel forms are written from."""

    packing: Packing
    grouped: bool
    scale: Operand | None
    zero: Operand | None
    zero_const: float
    op: str  # how the scale applies: * or /
    ieee: bool
    extra_ptrs: str
    loads: str
    epilogue: Sequence[str]
    result: str

    def weight(self) -> tuple[Packing, bool, Operand | None, Operand | None, float, str]:
        """How the weight is read: packing, per-group, scale, zero tensor, zero constant, scale op."""
        return self.packing, self.grouped, self.scale, self.zero, self.zero_const, self.op


# both kernel forms' signature and program tile ({extra_ptrs}: the epilogue's tensors)
_HEAD = """@triton.jit
def packed_linear_kernel(x_ptr, p_ptr, s_ptr, z_ptr, y_ptr,{extra_ptrs} M, N, K, stride_xm, stride_xk,
                         stride_pn, stride_pw, stride_sn, stride_sg, stride_zn, stride_zg, stride_ym,
                         GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr):
"""

_KERNEL = """
{head}
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rw = tl.arange(0, BLOCK_K // {E})
    KW = K // {E}
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    tl.static_assert(GROUP % BLOCK_K == 0)  # one scale per K block and element position
    tl.static_assert(BLOCK_K % {E} == 0)
{before}    for k0 in range(0, K, BLOCK_K):
        kw = k0 // {E} + rw
        p = tl.load(p_ptr + rn[None, :] * stride_pn + kw[:, None] * stride_pw,
                    mask=(kw[:, None] < KW) & (rn[None, :] < N), other=0)
{body}
{after}{extra_loads}{epilogue}
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], {result}.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""

_KERNEL_N = """
{head}
    NW = N // {E}
    rw = pid_n * (BLOCK_N // {E}) + tl.arange(0, BLOCK_N // {E})
    rk = tl.arange(0, BLOCK_K)
    tl.static_assert(GROUP % BLOCK_K == 0)  # one scale per K block
    tl.static_assert(BLOCK_N % {E} == 0)
{setup}    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        p = tl.load(p_ptr + rw[None, :] * stride_pn + ks[:, None] * stride_pw,
                    mask=(ks[:, None] < K) & (rw[None, :] < NW), other=0)
{body}
{tail}
"""


_FORWARD = """        x = {x}
        p = {p}
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = {n}
        s = {s}
        z = {z}
        y = torch.empty((M, N), dtype={dtype}, device=x2.device)
        grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N),)
        packed_linear_kernel[grid](x2, p, s, z, y,{extra_args} M, N, K, x2.stride(0), x2.stride(1),
                                   {p_strides}, {s_strides}, {z_strides}, y.stride(0),
                                   GROUP={group}, BLOCK_M=BLOCK_SIZE_M, BLOCK_N=BLOCK_SIZE_N,
                                   BLOCK_K=BLOCK_SIZE_K)
        return y.view(*x.shape[:-1], N)"""


def _operand_load(name: str, op: Operand | None, group: str, other: str, rn: str = "rn") -> str:
    """Kernel expression of the scale or zero row [1, columns] of group index `group` at columns `rn`
    (a packed one reads the word columns and shifts `_packed_setup` computed before the loop)."""
    if op is None:
        return ""
    ptr, sn, sg = f"{name}_ptr", f"stride_{name}n", f"stride_{name}g"
    kind = "tl.int32" if op.integer else "tl.float32"
    if op.packed <= 1:
        row = f"tl.load({ptr} + {rn} * {sn} + ({group}) * {sg}, mask={rn} < N, other={other})"
        return f"{row}.to({kind})[None, :]"
    word = f"tl.load({ptr} + {name}col_{rn} * {sn} + ({group}) * {sg}, mask={rn} < N, other=0)"
    plus = f" + {op.offset}" if op.offset else ""
    return f"((({word} >> {name}sh_{rn}) & 15){plus}).to({kind})[None, :]"


def _packed_setup(name: str, op: Operand | None, rn: str = "rn") -> list[str]:
    """Loop-invariant word columns and shifts of an operand packed along N, for `_operand_load`."""
    if op is None or op.packed <= 1:
        return []
    table = sum(s << (4 * j) for j, s in enumerate(op.slots))
    return [
        f"{name}col_{rn} = {rn} // {op.packed}",
        f"{name}sh_{rn} = (({table} >> (({rn} % {op.packed}) * 4)) & 15) * 4",
    ]


def _strides(op: Operand | None, var: str) -> str:
    """The kernel's (stride along N, stride along the groups) of the operand."""
    if op is None or op.layout == "scalar":
        return "0, 0"
    if op.layout == "row":
        return f"{var}.stride(0), 0"
    return (
        f"{var}.stride(1), {var}.stride(0)" if op.layout == "g_major" else f"{var}.stride(0), {var}.stride(1)"
    )


def packed_linear(
    args: Sequence[str],
    x: str,
    packed: str,
    packing: Packing,
    n: int,
    group: int | None,
    scale: Operand | None,
    zero: Operand | None,
    zero_const: float,
    dtype: str,
    epilogue: Sequence[str] = (),
    result: str = "acc",
    extras: Sequence[tuple[str, str]] = (),
    init: Sequence[str] = (),
    prelude: str = "",
    ieee: bool = False,
    blocks: tuple[int, int, int] = (16, 16, 32),
) -> str:
    """The candidate module. `x` and `packed` are forward-time expressions of the activations (..., K)
    and the packed weight; `n` the output features; `group` the input channels per scale and zero
    (None: one per output channel); `scale` / `zero` the tensors (None: 1 / `zero_const`); `extras` more
    tensors the epilogue reads as e0, e1, ... ((expression, kind `row` | `full` | `scalar`)); `init`
    ModelNew.__init__ lines and `prelude` module-level code they use; `ieee`: fp32 dots in full
    precision (no tf32 on GPUs)."""
    grouped = group is not None  # else the scale and zero apply once, not per K block
    op = "/" if scale is not None and scale.divide else "*"
    loads = epilogue_loads(extras)
    extra_ptrs = "".join(f" e{i}_ptr," for i in range(len(extras)))
    kp = _KernelParts(
        packing, grouped, scale, zero, zero_const, op, ieee, extra_ptrs, loads, epilogue, result
    )
    kernel = _kernel_along_n(kp) if packing.along_n else _kernel_along_k(kp)
    k_major = packing.k_major
    fwd = _FORWARD.format(
        x=x,
        p=packed,
        n=n,
        s=_shaped(scale) if scale else "p",
        z=_shaped(zero) if zero else "p",
        dtype=dtype,
        extra_args=epilogue_args(extras),
        p_strides="p.stride(1), p.stride(0)" if k_major else "p.stride(0), p.stride(1)",
        s_strides=_strides(scale, "s"),
        z_strides=_strides(zero, "z"),
        group=group if grouped else "BLOCK_SIZE_K",
    )
    model = model_class(args, fwd, init)
    return HEADER + (f"\n\n{prelude}" if prelude else "") + consts(*blocks) + kernel + model


def _kernel_along_k(kp: _KernelParts) -> str:
    """Values packed along K: one word tile per K block, one dot per element position."""
    packing, grouped, scale, zero, zero_const, op = kp.weight()
    e = packing.per_word
    lines: list[str] = []
    before: list[str] = _packed_setup("z", zero)
    after: list[str] = []
    if not grouped:
        if zero is not None:
            before.append(f"z = {_operand_load('z', zero, '0', '0')}")
        if scale is not None:
            after.append(f"acc = acc {op} {_operand_load('s', scale, '0', '1.0')}")
    shared = not packing.planes
    precision = ', input_precision="ieee"' if kp.ieee else ""
    if grouped and shared:
        if zero is not None:
            lines.append(f"z = {_operand_load('z', zero, 'k0 // GROUP', '0')}")
        lines.append("part = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)")
    for j, slot in enumerate(packing.slots):
        k_index = f"kw[None, :] * {e} + {j}" if not packing.planes else f"{j} * KW + kw[None, :]"
        lines.append(
            f"a{j} = tl.load(x_ptr + rm[:, None] * stride_xm + ({k_index}) * stride_xk, "
            f"mask=(rm[:, None] < M) & (kw[None, :] < KW), other=0.0)"
        )
        g = f"({j} * KW + k0 // {e}) // GROUP"  # a plane's own group
        if grouped and not shared and zero is not None:
            lines.append(f"z = {_operand_load('z', zero, g, '0')}")
        lines.append(f"w{j} = {_weight_value(packing, slot, zero, zero_const, f'a{j}.dtype')}")
        dot = f"tl.dot(a{j}, w{j}{precision})"
        if grouped and not shared:
            scale_row = f" {op} {_operand_load('s', scale, g, '1.0')}" if scale is not None else ""
            lines.append(f"acc += {dot}{scale_row}")
        elif grouped:
            lines.append(f"part += {dot}")
        else:
            lines.append(f"acc += {dot}")
    if grouped and shared:
        lines.append(
            f"acc += part {op} {_operand_load('s', scale, 'k0 // GROUP', '1.0')}" if scale else "acc += part"
        )
    body = indent("\n".join(lines).split("\n"), 8)
    return _KERNEL.format(
        head=_HEAD.format(extra_ptrs=kp.extra_ptrs) + PROGRAM_TILE,
        E=e,
        before=indent(before) + "\n" if before else "",
        body=body,
        after=indent(after) + "\n" if after else "",
        extra_loads=kp.loads,
        epilogue=indent(kp.epilogue),
        result=kp.result,
    )


def _kernel_along_n(kp: _KernelParts) -> str:
    """Values packed along N (AWQ): one activation tile and one word tile per K block, one dot and one
    accumulator per element position (its output columns every E-th, or one plane), each position's
    epilogue and store after the loop."""
    packing, grouped, scale, zero, zero_const, op = kp.weight()
    e = packing.per_word
    precision = ', input_precision="ieee"' if kp.ieee else ""
    setup: list[str] = []
    body: list[str] = []
    tail: list[str] = []
    for j, slot in enumerate(packing.slots):
        rn = f"rn{j}"
        setup.append(f"{rn} = rw * {e} + {j}" if not packing.planes else f"{rn} = {j} * NW + rw")
        setup.append(f"acc{j} = tl.zeros([BLOCK_M, BLOCK_N // {e}], tl.float32)")
        setup += _packed_setup("z", zero, rn)
        if zero is not None and not grouped:
            setup.append(f"z{j} = {_operand_load('z', zero, '0', '0', rn)}")
        if zero is not None and grouped:
            body.append(f"z{j} = {_operand_load('z', zero, 'k0 // GROUP', '0', rn)}")
        body.append(f"w{j} = {_weight_value(packing, slot, zero, zero_const, 'a.dtype', f'z{j}')}")
        dot = f"tl.dot(a, w{j}{precision})"
        if grouped and scale is not None:
            body.append(f"acc{j} += {dot} {op} {_operand_load('s', scale, 'k0 // GROUP', '1.0', rn)}")
        else:
            body.append(f"acc{j} += {dot}")
        tail += [f"rn = {rn}", f"acc = acc{j}"]
        if scale is not None and not grouped:
            tail.append(f"acc = acc {op} {_operand_load('s', scale, '0', '1.0', rn)}")
        tail += [*(x.strip() for x in kp.loads.splitlines()), *kp.epilogue]
        tail.append(
            f"tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], "
            f"{kp.result}.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))"
        )
    return _KERNEL_N.format(
        head=_HEAD.format(extra_ptrs=kp.extra_ptrs) + PROGRAM_TILE,
        E=e,
        setup=indent(setup) + "\n",
        body=indent(body, 8),
        tail=indent(tail),
    )


def _shaped(op: Operand) -> str:
    """The operand as a 2-D tensor: (N, G), (G, N), (N, 1) or (1, 1); a packed one as the model holds it."""
    if op.packed > 1:
        return op.expr
    shape = {"g_major": "-1, N", "row": "N, 1", "scalar": "1, 1"}.get(op.layout, "N, -1")
    return f"{op.expr}.reshape({shape})"


def _weight_value(
    packing: Packing, slot: int, zero: Operand | None, zero_const: float, dtype: str, z: str = "z"
) -> str:
    """The tile of nibble `slot` minus its zero point (the row `z` loaded from `zero`, else the
    constant), in `dtype`."""
    value = _nibble(packing, slot)
    if zero is not None and zero.integer:  # exact in the integers (uint8 words' nibbles widened first)
        signed = f"{value}.to(tl.int32)" if packing.unsigned_words else value
        return f"({signed} - {z}).to({dtype})"
    if zero is not None:
        return f"({value}.to(tl.float32) - {z}).to({dtype})"
    if zero_const and float(zero_const).is_integer() and -112 <= zero_const <= 127:
        # in the integers (a signed type: uint8 words' nibbles would wrap), then one conversion
        signed = f"{value}.to(tl.int8)" if packing.unsigned_words else value
        return f"({signed} - {int(zero_const)}).to({dtype})"
    if zero_const:
        return f"({value}.to(tl.float32) - {float(zero_const)!r}).to({dtype})"
    return f"{value}.to({dtype})"


def _nibble(packing: Packing, slot: int) -> str:
    """The integer value of nibble `slot` of the word tile p, in the fewest operations: no shift for
    the lowest, no mask for the highest of unsigned words, and a signed value by shifting it to the
    top of a signed word and back (an arithmetic shift sign-extends)."""
    bits = 4 * packing.per_word
    top = slot == packing.per_word - 1
    if not packing.signed:
        if slot == 0:
            return "(p & 15)"
        if top and packing.unsigned_words:
            return f"(p >> {4 * slot})"
        return f"((p >> {4 * slot}) & 15)"
    if packing.unsigned_words:  # signed nibbles in uint8 words: sign-extend by hand
        return f"((((p >> {4 * slot}) & 15).to(tl.int32) ^ 8) - 8)"
    if top:
        return f"(p >> {bits - 4})"
    return f"((p << {bits - 4 - 4 * slot}) >> {bits - 4})"
