"""GPU rewrite of a conv1d / conv2d seed: an implicit GEMM with pre-packed weights.

The seed is recognised by its model: `ModelNew.__init__` builds one `nn.Conv1d` / `nn.Conv2d`
(stride, dilation and groups left at 1) and forward launches one kernel whose epilogue is only the
bias and the store. The rewrite reads the activations in place (NCHW / NCL: a tile of output
pixels is contiguous along the image rows, so the pixel axis is the GEMM's M), and the weights
packed once into (taps, C_in, C_out) -- K rows of the GEMM, C_out contiguous -- by a cached
transform keyed on the weight's storage and version (re-packed when the weight changes; the
evaluator builds the model on the device, so the packing is a device copy). One flat loop runs
over taps x C_in blocks so the pipeliner overlaps every load; programs walk (pixel, channel)
tiles in grouped order. Sizes and launch options are module constants (CONV_*).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from kegen.search.operators.mutations.base import MutationError, jit_functions
from kegen.search.operators.templates.gpu_launch import (
    find_launch,
    module_imports,
    module_support,
    rewritten_module,
    set_constants,
)

MARKER = "# kegen-gpu: conv"
EPILOGUE_MARK = "    # BATCHNORM_ACTIVATION\n"  # where a kernel template's BatchNorm and activation go


def bn_prologue(indent: str, co: str, ok: str) -> str:
    """Kernel lines computing the eval-mode BatchNorm's per-channel `bn_scale` and `bn_shift` over
    channels `co` (valid where `ok`) from its running statistics (and affine weights)."""
    load = "tl.load({p} + " + co + ", mask=" + ok + ", other={o}).to(tl.float32)"
    lines = [
        "if HAS_BN:",
        "    bn_scale = 1.0 / tl.sqrt(" + load.format(p="v_ptr", o="1.0") + " + EPS)",
        "    if BN_AFFINE:",
        "        bn_scale = bn_scale * " + load.format(p="g_ptr", o="0.0"),
        "    bn_shift = -" + load.format(p="m_ptr", o="0.0") + " * bn_scale",
        "    if BN_AFFINE:",
        "        bn_shift += " + load.format(p="be_ptr", o="0.0"),
    ]
    return "".join(f"{indent}{ln}\n" for ln in lines)


# the conv kernels' activations (ACT codes 1, 2, ...; 0 is none): `acc` -> its image, in Triton
ACTIVATION_EXPRS = {
    "relu": "tl.maximum(acc, 0.0)",
    "silu": "acc * tl.sigmoid(acc)",
    "relu6": "tl.minimum(tl.maximum(acc, 0.0), 6.0)",
    "gelu": "0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))",
    "hardswish": "acc * (tl.minimum(tl.maximum(acc + 3.0, 0.0), 6.0) / 6.0)",
    "sigmoid": "tl.sigmoid(acc)",
}
ACTIVATIONS = ("none", *ACTIVATION_EXPRS)  # index = the kernels' ACT code


def epilogue_declaration(bn: str, act: str, residual: str | None) -> str:
    """ModelNew.__init__'s line naming the convolution's epilogue (read by `EPILOGUE_METHOD`; the rewrites
    keep it): the BatchNorm's path ("" for none), the activation and the forward argument added as
    the residual (left out where none)."""
    if act not in ACTIVATIONS:
        raise ValueError(f"activation {act!r} is not one of {ACTIVATIONS}")
    parts = (bn, act, residual) if residual else (bn, act)
    return f"self.kegen_conv_epilogue = {parts!r}"


def with_epilogue(init: Sequence[str], bn: str, act: str, residual: str | None) -> list[str]:
    """ModelNew.__init__'s lines `init`, then the epilogue's declaration where there is one."""
    extra = [epilogue_declaration(bn, act, residual)] if bn or act != "none" or residual else []
    return [*init, *extra]


def bn_act_apply(indent: str, axis: str, residual: tuple[str, str]) -> str:
    """Kernel lines applying the BatchNorm (`bn_scale`, `bn_shift` broadcast by `axis`), adding the
    residual (`residual`: the pointers of the output tile's elements in `r_ptr`'s tensor, and their
    mask) and applying the `ACT` activation (`ACTIVATIONS`) to `acc`."""
    pointers, mask = residual
    lines = ["if HAS_BN:", f"    acc = acc * bn_scale{axis} + bn_shift{axis}"]
    lines += ["if HAS_RES:", f"    acc += tl.load({pointers}, mask={mask}, other=0.0).to(tl.float32)"]
    for code, expr in enumerate(ACTIVATION_EXPRS.values(), start=1):
        lines += [f"if ACT == {code}:", f"    acc = {expr}"]
    return "".join(f"{indent}{ln}\n" for ln in lines)


@dataclass(frozen=True)
class ConvConfig:
    """Pixel block (M), output-channel block (N), input-channel block (K), grouping, warps, stages."""

    block_p: int = 128
    block_co: int = 128
    block_ci: int = 64
    group_m: int = 8
    warps: int = 8
    stages: int = 3

    @property
    def label(self) -> str:
        return f"{self.block_p}x{self.block_co}x{self.block_ci} g{self.group_m} w{self.warps} s{self.stages}"

    def constants(self) -> str:
        return (
            f"CONV_BLOCK_P = {self.block_p}\nCONV_BLOCK_CO = {self.block_co}\n"
            f"CONV_BLOCK_CI = {self.block_ci}\n"
            f"CONV_GROUP_M = {self.group_m}\nCONV_WARPS = {self.warps}\nCONV_STAGES = {self.stages}\n"
        )


_RESIDUAL = (  # the output tile in the residual tensor: pointers, mask
    "r_ptr + (img * (C_OUT * n_pix) + pix)[:, None] + offs_co[None, :] * n_pix",
    "p_ok[:, None] & co_ok[None, :]",
)
_KERNEL = """
@triton.jit
def conv_igemm_kernel(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, BATCH, C_IN, C_OUT,
                      H, W,
                      OH, OW, EPS,
                      KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                      STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, DIL_H: tl.constexpr,
                      DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_BN: tl.constexpr,
                      BN_AFFINE: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr,
                      EVEN_CI: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                      BLOCK_CI: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    n_pix = OH * OW
    num_pid_m = tl.cdiv(BATCH * n_pix, BLOCK_P)
    num_pid_n = tl.cdiv(C_OUT, BLOCK_CO)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    offs_p = pid_m * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_co = pid_n * BLOCK_CO + tl.arange(0, BLOCK_CO)
    p_ok = offs_p < BATCH * n_pix
    img = offs_p // n_pix
    pix = offs_p % n_pix
    oh = pix // OW
    ow = pix % OW
    x_img = img * (C_IN * H * W)
    co_ok = offs_co < C_OUT
    rk = tl.arange(0, BLOCK_CI)
    n_ci = tl.cdiv(C_IN, BLOCK_CI)
    acc = tl.zeros([BLOCK_P, BLOCK_CO], tl.float32)
    for it in range(0, KH * KW * n_ci):
        tap = it // n_ci
        ci = (it % n_ci) * BLOCK_CI + rk
        ih = oh * STRIDE_H + ((tap // KW) * DIL_H - PAD_H)
        iw = ow * STRIDE_W + ((tap % KW) * DIL_W - PAD_W)
        ok = p_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a_ptrs = x_ptr + (x_img + ih * W + iw)[:, None] + ci[None, :] * (H * W)
        b_ptrs = w_ptr + (tap * C_IN + ci)[:, None] * C_OUT + offs_co[None, :]
        if EVEN_CI:
            a = tl.load(a_ptrs, mask=ok[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=co_ok[None, :], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=ok[:, None] & (ci[None, :] < C_IN), other=0.0)
            b = tl.load(b_ptrs, mask=(ci[:, None] < C_IN) & co_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    # BATCHNORM_ACTIVATION
    y_off = (img * (C_OUT * n_pix) + pix)[:, None] + offs_co[None, :] * n_pix
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=p_ok[:, None] & co_ok[None, :])
""".replace(
    EPILOGUE_MARK, bn_prologue("    ", "offs_co", "co_ok") + bn_act_apply("    ", "[None, :]", _RESIDUAL)
)

# ModelNew's method that the convolution kernels' epilogue arguments come from (the seed's too)
EPILOGUE_METHOD = '''
    def _epilogue(self, conv):
        """The convolution's epilogue operands: (its bias, the eval-mode BatchNorm's (running mean,
        running variance, weight, bias) or None, its eps, whether it is affine, the activation code),
        the BatchNorm and activation as ModelNew's `kegen_conv_epilogue` names them (none by default)."""
        bn_path, act = getattr(self, "kegen_conv_epilogue", ("", "none"))[:2]
        code = {act_codes}[act]
        bias = conv.bias.detach() if conv.bias is not None else None
        bound = getattr(conv, "batch_norm", None)  # operands bound per call (drafting's ConvOperands)
        if bound is not None:
            mean, var, weight, shift, eps, affine = bound
            return bias, (mean, var, weight, shift) if affine else (mean, var, mean, mean), eps, affine, code
        if not bn_path:
            return bias, None, 0.0, False, code
        bn = self.get_submodule(bn_path)
        if bn.training or bn.running_mean is None or bn.running_var is None:
            raise ValueError("the BatchNorm epilogue needs eval mode and running statistics")
        mean, var = bn.running_mean.detach(), bn.running_var.detach()
        if bn.weight is None or bn.bias is None:
            return bias, (mean, var, mean, mean), float(bn.eps), False, code
        return bias, (mean, var, bn.weight.detach(), bn.bias.detach()), float(bn.eps), True, code
'''.replace("{act_codes}", repr({name: code for code, name in enumerate(ACTIVATIONS)}))

# forward's lines after `x`, `nd` and `w` (the weight as the kernel reads it) are bound: the epilogue's
# operands and the convolution's sizes, taps, strides, dilations, padding and output size
GEOMETRY = """        b, bn, eps, affine, act = self._epilogue(conv)
        bn_m, bn_v, bn_g, bn_b = bn or (w, w, w, w)
        batch, c_in, c_out = x.shape[0], x.shape[1], conv.out_channels
        if nd == 1:
            h, w_ = 1, x.shape[2]
            kh, kw, sh, sw, dh, dw = 1, conv.kernel_size[0], 1, conv.stride[0], 1, conv.dilation[0]
            ph, pw = 0, conv.padding[0]
        else:
            h, w_ = x.shape[2], x.shape[3]
            (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
            ph, pw = conv.padding
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w_ + 2 * pw - dw * (kw - 1) - 1) // sw + 1
"""

# ModelNew's method packing a convolution weight for the kernels, cached on the weight's storage and version
PACKED_WEIGHT_METHOD = '''
    def _packed_weight(self, w):
        """(C_out, C_in, *taps) -> (taps, C_in, C_out), packed once per weight storage and version."""
        key = (w.data_ptr(), w._version, tuple(w.shape), w.device)
        if getattr(self, "_kegen_pack_key", None) != key:
            self._kegen_pack = w.detach().permute(*range(2, w.dim()), 1, 0).contiguous()
            self._kegen_pack_key = key
        return self._kegen_pack
'''

_MODEL_TAIL = (
    PACKED_WEIGHT_METHOD
    + EPILOGUE_METHOD
    + """
    def forward(self, {params}):
        conv = self.{attr}
        nd = {x}.dim() - 2
        if conv.groups != 1 or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("the implicit-GEMM kernel covers groups 1 and numeric zero padding")
        x = {x}.contiguous()
        r = {res}
        w = self._packed_weight(conv.weight)
"""
    + GEOMETRY
    + """        shape = (batch, c_out, ow) if nd == 1 else (batch, c_out, oh, ow)
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(batch * oh * ow, CONV_BLOCK_P) * triton.cdiv(c_out, CONV_BLOCK_CO),)
        conv_igemm_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b,
                                w if r is None else r, y, batch, c_in, c_out,
                                h, w_, oh, ow, eps, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=sh,
                                STRIDE_W=sw, DIL_H=dh, DIL_W=dw, HAS_BIAS=b is not None,
                                HAS_BN=bn is not None, BN_AFFINE=affine, HAS_RES=r is not None, ACT=act,
                                EVEN_CI=c_in % CONV_BLOCK_CI == 0, BLOCK_P=CONV_BLOCK_P,
                                BLOCK_CO=CONV_BLOCK_CO, BLOCK_CI=CONV_BLOCK_CI, GROUP_M=CONV_GROUP_M,
                                num_warps=CONV_WARPS, num_stages=CONV_STAGES)
        return y
"""
)

# drafting's ConvOperands: a geometry whose weight and bias forward binds (a kernel group's inputs)
_CONV_CLASSES = ("Conv1d", "Conv2d", "ConvOperands")


def _conv_attr(init: ast.FunctionDef) -> str:
    """The `self.<attr>` holding the model's one Conv1d/Conv2d (directly or through a local)."""
    built: dict[str, ast.Call] = {}
    attrs = []
    for n in ast.walk(init):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
            continue
        calls = [
            c
            for c in ast.walk(n.value)
            if isinstance(c, ast.Call) and ast.unparse(c.func).split(".")[-1] in _CONV_CLASSES
        ]
        locals_read = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)} & set(built)
        target = ast.unparse(n.targets[0])
        if calls or locals_read:
            call = calls[0] if calls else built[next(iter(locals_read))]
            if target.startswith("self."):
                attrs.append((target[5:], call))
            else:
                built[target] = call
    if len(attrs) != 1:
        raise MutationError(f"{len(attrs)} convolution modules in ModelNew.__init__ (want one)")
    attr, call = attrs[0]
    for kw in call.keywords:
        if kw.arg == "groups" and ast.unparse(kw.value) != "1":
            raise MutationError(f"the convolution sets groups={ast.unparse(kw.value)}")
    if ast.unparse(call.func).split(".")[-1] == "ConvOperands":  # groups is its sixth argument
        if len(call.args) != 6 or ast.unparse(call.args[5]) != "1":
            raise MutationError("the bound convolution is grouped")
    elif len(call.args) > 6:
        raise MutationError("the convolution passes groups positionally")
    return attr


def _bound_attr(cls: ast.ClassDef, attr: str) -> tuple[str, set[str]]:
    """(`attr` as forward reads the convolution: `conv.bind(w, b)` where forward binds its operands
    (drafting's ConvOperands), else `attr`; the forward arguments the binding reads)."""
    fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    for n in ast.walk(fwd) if fwd is not None else ():
        if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
            continue
        text = ast.unparse(n.value)
        if text.startswith(f"self.{attr}.bind("):
            return text.removeprefix("self."), {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
    return attr, set()


def _is_template_epilogue(s: ast.stmt) -> bool:
    """`if HAS_BN: ...` / `if ACT == k: ...`: the templates' BatchNorm and activation (`bn_prologue`,
    `bn_act_apply`), which the rewrites keep (ModelNew's `kegen_conv_epilogue` names them)."""
    if not isinstance(s, ast.If) or s.orelse:
        return False
    if not {"ACT", "HAS_BN", "HAS_RES"} & {n.id for n in ast.walk(s.test) if isinstance(n, ast.Name)}:
        return False
    calls = {ast.unparse(n.func).split(".")[-1] for n in ast.walk(s) if isinstance(n, ast.Call)}
    return calls <= {"maximum", "minimum", "sigmoid", "erf", "load", "to", "sqrt"} and all(
        isinstance(n, ast.Assign | ast.AugAssign | ast.If) for n in ast.walk(s) if isinstance(n, ast.stmt)
    )


def _epilogue_is_bias_store(fn: ast.FunctionDef) -> bool:
    """Whether everything after the kernel's last top-level loop only loads, adds and stores (and
    applies the templates' BatchNorm and activation)."""
    loops = [i for i, s in enumerate(fn.body) if isinstance(s, ast.For)]
    if not loops:
        return False
    for s in fn.body[loops[-1] + 1 :]:
        if _is_template_epilogue(s):
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] not in ("load", "store", "to"):
                return False
            if isinstance(n, ast.BinOp) and not isinstance(n.op, (ast.Add, ast.Mult, ast.BitAnd)):
                return False
            if isinstance(n, ast.AugAssign) and not isinstance(n.op, ast.Add):
                return False
    return True


@dataclass(frozen=True)
class ConvModule:
    """A one-convolution model as the rewrites read it."""

    x: str  # forward's argument the convolution reads
    attr: str  # the `self.<attr>` holding the convolution module
    init_src: str  # ModelNew.__init__'s source
    params: str  # forward's parameters, in order
    residual: str | None  # forward's argument added before the activation (`kegen_conv_epilogue`)

    def fill(self, tail: str) -> str:
        """A rewrite's model tail with this model's names in its `{x}`, `{attr}`, `{params}`, `{res}`."""
        res = f"{self.residual}.contiguous()" if self.residual else "None"
        return (
            tail.replace("{x}", self.x)
            .replace("{attr}", self.attr)
            .replace("{params}", self.params)
            .replace("{res}", res)
        )


def _declared_residual(init: ast.FunctionDef) -> str | None:
    """The residual argument `self.kegen_conv_epilogue = (bn, act, residual)` names, if any."""
    for n in ast.walk(init):
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["self.kegen_conv_epilogue"]:
            try:
                value = ast.literal_eval(n.value)
            except ValueError as exc:
                raise MutationError("kegen_conv_epilogue is not a literal") from exc
            return str(value[2]) if isinstance(value, tuple) and len(value) == 3 else None
    return None


def conv_module(source: str) -> ConvModule:
    """The one-convolution model of `source` (one kernel whose epilogue is the bias, the templates'
    BatchNorm, residual and activation, launched from forward(x) or forward(x, residual));
    MutationError otherwise."""
    tree = ast.parse(source)
    kernels = jit_functions(tree)
    if len(kernels) != 1 or not _epilogue_is_bias_store(kernels[0]):
        raise MutationError("not one convolution kernel with a bias-only epilogue")
    launch = find_launch(source, kernels[0].name)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    init = (
        next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if cls
        else None
    )
    if init is None:
        raise MutationError("ModelNew has no __init__")
    attr = _conv_attr(init)
    init_src = ast.get_source_segment(source, init, padded=True)
    assert init_src is not None
    residual = _declared_residual(init)
    assert cls is not None
    attr, operands = _bound_attr(cls, attr)
    args = launch.forward_args
    free = [a for a in args if a not in operands]  # forward's tensors other than bound weights
    if len(free) == 1 and residual in (None, free[0]):
        x = free[0]  # the residual, if any, is the convolution's own input
    elif len(free) == 2 and residual in free:
        x = free[1 - free.index(residual)]
    else:
        raise MutationError("the kernel is not launched from forward(x) (or forward(x, residual))")
    return ConvModule(x, attr, init_src, ", ".join(args), residual)


def rewrite(source: str, config: ConvConfig) -> str:
    """The module rewritten as the implicit-GEMM convolution; MutationError when it is not a
    one-convolution model with a bias-only epilogue."""
    if MARKER in source:
        raise MutationError("already rewritten for the GPU (use a config move)")
    model = conv_module(source)
    tail = model.fill(_MODEL_TAIL)
    header = MARKER + "\n" + config.constants()
    return rewritten_module(
        module_imports(source) + module_support(source), header, _KERNEL, model.init_src, tail
    )


def set_config(source: str, config: ConvConfig) -> str:
    """A rewritten convolution module with its sizes replaced."""
    return set_constants(source, MARKER, config.constants(), "convolution")
