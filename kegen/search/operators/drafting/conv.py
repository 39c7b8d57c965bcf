"""Drafting convolution chains: one nn.Conv1d / nn.Conv2d module or F.conv1d / F.conv2d on a
parameter (any stride and dilation, zero padding), then optionally an eval-mode BatchNorm module, an
input of the output's shape added (a residual) and an activation (ReLU, ReLU6, SiLU, GELU, Hardswish,
sigmoid), with fp32 upcasts and the cast back to the input's dtype anywhere. A depthwise 2-D chain
(groups equal to its input and output channels) is drafted as the stencil template
(`templates/conv/depthwise.py`: the dot engine would waste itself on it); a chain with groups 1 as the
implicit-GEMM seed the convolution moves rewrite (`templates/conv/seed.py`). A transposed convolution
module is drafted per output phase (`templates/conv/transpose.py`). Max and average pooling (1-D, 2-D)
on an input is drafted as the pooling template (`templates/conv/pool.py`)."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Node

from kegen.search.operators.drafting.elementwise import chain
from kegen.search.operators.drafting.graph import GELU, Traced, dtype_of, rank_of, shape_of, strip_casts
from kegen.search.operators.drafting.weights import reference_init, twins
from kegen.search.operators.templates.conv import depthwise as templates_depthwise
from kegen.search.operators.templates.conv import grouped as templates_conv_grouped
from kegen.search.operators.templates.conv import pool as templates_pool
from kegen.search.operators.templates.conv import seed as templates_conv_seed
from kegen.search.operators.templates.conv import transpose as templates_transpose

Conv = nn.Conv1d | nn.Conv2d
BatchNorm = nn.BatchNorm1d | nn.BatchNorm2d
CONV_FUNCTIONS = {F.conv1d: 1, F.conv2d: 2, torch.conv1d: 1, torch.conv2d: 2}
# activations after the convolution (and its BatchNorm), by module class and by function or method
_ACTIVATION_MODULES = (
    (nn.ReLU6, "relu6"),  # before ReLU's check: a Hardtanh, not a ReLU subclass, but kept first anyway
    (nn.ReLU, "relu"),
    (nn.SiLU, "silu"),
    (nn.GELU, "gelu"),
    (nn.Hardswish, "hardswish"),
    (nn.Sigmoid, "sigmoid"),
)
_ACTIVATION_TARGETS = (
    ({torch.relu, F.relu, "relu", "relu_"}, "relu"),
    ({F.silu}, "silu"),
    ({F.relu6, F.hardtanh}, "relu6"),
    (GELU, "gelu"),
    ({F.hardswish}, "hardswish"),
    ({torch.sigmoid, F.sigmoid, "sigmoid"}, "sigmoid"),
)
ADD = {operator.add, operator.iadd, torch.add, "add", "add_"}
# the functional convolution's arguments after input and weight, in order, with their defaults
_CONV_ARGS = (("bias", None), ("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1))


@dataclass
class _Geometry:
    """A convolution's weight and bias (parameter paths in the reference) and its geometry."""

    weight: str
    bias: str | None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    weight_input: Node | None = None  # the weight (and bias) as inputs: a `kegen tune` group's operands
    bias_input: Node | None = None


@dataclass
class _Chain:
    x: Node  # the input the convolution reads
    conv: Node
    geometry: _Geometry
    module: Conv | None  # the convolution's own module (None for F.conv*)
    bn: str = ""  # the BatchNorm module's path ("" for none)
    act: str = "none"
    residual: Node | None = None  # the input added before the activation
    nodes: set[Node] = field(default_factory=set)  # every node of the chain, casts included
    bn_inputs: tuple[Any, ...] = ()  # F.batch_norm on inputs: (mean, var, weight, bias, eps)


def _tuple(v: object, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, list | tuple) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def _param_path(t: Traced, n: object, used: set[Node]) -> str | None:
    """The dotted path of the parameter a get_attr node (below casts) reads, else None."""
    n = strip_casts(n, used)
    if not (isinstance(n, Node) and n.op == "get_attr"):
        return None
    try:
        value = operator.attrgetter(str(n.target))(t.model)
    except AttributeError:
        return None
    return str(n.target) if isinstance(value, nn.Parameter) else None


def _padding(padding: object, kernel: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[int, ...] | None:
    """Numeric zero padding per spatial dim: "valid" is none, "same" (stride 1) half the dilated
    kernel's extent where that is symmetric; None where it is not (an odd extent pads one side more)."""
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        extents = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return None if any(e % 2 for e in extents) else tuple(e // 2 for e in extents)
    return _tuple(padding, len(kernel))


def _module_geometry(t: Traced, n: Node, conv: nn.Module) -> _Geometry | None:
    if not isinstance(conv, Conv) or n.kwargs or len(n.args) != 1 or conv.padding_mode != "zeros":
        return None
    padding = _padding(conv.padding, tuple(conv.kernel_size), tuple(conv.dilation))
    if padding is None:
        return None
    path = str(n.target)
    bias = f"{path}.bias" if conv.bias is not None else None
    return _Geometry(f"{path}.weight", bias, tuple(conv.stride), padding, tuple(conv.dilation), conv.groups)


def _input(t: Traced, n: object, rank: int) -> Node | None:
    """`n` where it is a forward input of rank `rank` (a convolution's weight or bias operand)."""
    return n if isinstance(n, Node) and n in t.ph and rank_of(n) == rank else None


def _function_geometry(t: Traced, n: Node, used: set[Node]) -> _Geometry | None:
    nd = CONV_FUNCTIONS[n.target]  # type: ignore[index]
    if len(n.args) < 2:
        return None
    weight = _param_path(t, n.args[1], used)
    weight_input = _input(t, n.args[1], nd + 2) if weight is None else None
    values: dict[str, Any] = dict(_CONV_ARGS)
    values.update(zip([k for k, _ in _CONV_ARGS], n.args[2:], strict=False))
    values.update(n.kwargs)
    if weight is None and weight_input is None:
        return None
    if set(values) != {k for k, _ in _CONV_ARGS} or not isinstance(values["groups"], int):
        return None
    bias = bias_input = None
    if values["bias"] is not None:
        if weight_input is not None:
            bias_input = _input(t, values["bias"], 1)
        else:
            bias = _param_path(t, values["bias"], used)
        if bias is None and bias_input is None:
            return None
    stride, dil = _tuple(values["stride"], nd), _tuple(values["dilation"], nd)
    if stride is None or dil is None:
        return None
    shape = shape_of(weight_input) if weight is None else operator.attrgetter(weight)(t.model).shape
    kernel = tuple(shape[2:]) if shape is not None else ()
    pad = _padding(values["padding"], kernel, dil) if len(kernel) == nd else None
    if pad is None:
        return None
    return _Geometry(weight or "", bias, stride, pad, dil, values["groups"], weight_input, bias_input)


def _match_chain(t: Traced) -> _Chain | None:
    """The convolution chain the whole reference computes, else None."""
    if t.out is None:
        return None
    used: set[Node] = set()
    node = strip_casts(t.out, used)
    act = "none"
    if isinstance(node, Node) and node.args and (found := _activation(t, node)) is not None:
        act = found
        used.add(node)
        node = strip_casts(node.args[0], used)
    residual = None
    if isinstance(node, Node) and node.target in ADD and len(node.args) == 2 and not node.kwargs:
        a, b = (strip_casts(v, used) for v in node.args)
        res = next((v for v in (b, a) if v in t.ph and shape_of(v) == shape_of(t.out)), None)
        if res is None:
            return None
        assert isinstance(res, Node)
        residual = res
        used.add(node)
        node = a if res is b else b
    bn = ""
    if isinstance(node, Node) and isinstance(t.module(node), BatchNorm) and len(node.args) == 1:
        m = t.module(node)
        assert isinstance(m, BatchNorm)
        if not m.track_running_stats or m.running_mean is None:
            return None
        bn = str(node.target)
        used.add(node)
        node = strip_casts(node.args[0], used)
    bn_inputs: tuple[Any, ...] = ()
    if isinstance(node, Node) and node.target is F.batch_norm and (stats := _bn_inputs(t, node)):
        bn_inputs = stats
        used.add(node)
        node = strip_casts(node.args[0], used)
    if not isinstance(node, Node) or not node.args:
        return None
    module = t.module(node)
    if module is not None:
        geometry = _module_geometry(t, node, module)
    elif node.op == "call_function" and node.target in CONV_FUNCTIONS:
        geometry = _function_geometry(t, node, used)
    else:
        return None
    x = strip_casts(node.args[0], used)
    if geometry is None or x not in t.ph:
        return None
    assert isinstance(x, Node)
    used.add(node)
    # every compute node is the chain's (a `getattr(x, "dtype")` feeding the final cast aside)
    if any(n not in used and n.target is not getattr for n in t.ops):
        return None
    if bn_inputs and geometry.weight_input is None:  # statistics as inputs come with input weights
        return None
    conv = module if isinstance(module, Conv) else None
    return _Chain(x, node, geometry, conv, bn, act, residual, used, bn_inputs)


def _bn_inputs(t: Traced, n: Node) -> tuple[Any, ...] | None:
    """F.batch_norm(x, mean, var, weight, bias, training=False, momentum, eps) on [C] inputs (weight and
    bias both or neither): (mean, var, weight, bias, eps), else None."""
    names = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
    p: dict[str, Any] = dict(zip(names, n.args, strict=False)) | dict(n.kwargs)
    stats = [p.get(k) for k in ("running_mean", "running_var", "weight", "bias")]
    if p.get("training", False) or not isinstance(p.get("eps", 1e-5), float):
        return None
    if (stats[2] is None) != (stats[3] is None):
        return None
    if any(s is not None and (s not in t.ph or rank_of(s) != 1) for s in stats) or None in stats[:2]:
        return None
    return (*stats, float(p.get("eps", 1e-5)))


def _activation(t: Traced, n: Node) -> str | None:
    """The name (`gpu_conv.ACTIVATIONS`) of the activation node `n` computes, else None."""
    module = t.module(n)
    if module is not None:
        if isinstance(module, nn.GELU) and module.approximate != "none":
            return None
        return next((name for cls, name in _ACTIVATION_MODULES if isinstance(module, cls)), None)
    if n.target in GELU and n.kwargs.get("approximate", "none") != "none":
        return None
    if n.target is F.hardtanh and tuple(n.args[1:]) + tuple(n.kwargs.values()) != (0.0, 6.0):
        return None
    return next((name for targets, name in _ACTIVATION_TARGETS if n.target in targets), None)


def _checked(t: Traced, chain: _Chain) -> tuple[torch.Tensor, int] | None:
    """(the convolution's weight (an input's traced value: shape and dtype only), its spatial rank)
    where input, weight and output agree."""
    g = chain.geometry
    if g.weight_input is not None and chain.bn:  # BatchNorm modules come with module weights only
        return None
    if g.weight_input is not None:
        weight = t.inputs[t.ph.index(g.weight_input)]
    else:
        weight = operator.attrgetter(g.weight)(t.model)
    nd = weight.dim() - 2
    if nd not in (1, 2) or rank_of(chain.x) != nd + 2:
        return None
    if not (dtype_of(chain.x) == dtype_of(t.out) == weight.dtype):
        t.notes.append("a convolution whose weight, input and output dtypes differ")
        return None
    return weight, nd


def _weights(t: Traced, chain: _Chain, weight: torch.Tensor, name: str) -> tuple[list[str], str, str]:
    """(ModelNew.__init__ lines, the BatchNorm's path in ModelNew, module-level prelude): the module
    rebuilt by seeded construction where that gives the reference's weights (a module of unit stride
    and dilation and no BatchNorm), else the reference built as `Reference` and a geometry-only conv
    module pointed at its parameters."""
    nd = weight.dim() - 2
    g = chain.geometry
    if g.weight_input is not None:  # operands bound per call (`_attr`) to a geometry that holds none
        k = tuple(weight.shape[2:])
        geometry = f"{weight.shape[0]}, {k}, {g.stride}, {g.padding}, {g.dilation}, {g.groups}"
        return [f"self.{name} = ConvOperands({geometry})"], "", CONV_OPERANDS
    ones = (1,) * nd
    plain = chain.module is not None and (g.stride, g.dilation) == (ones, ones)
    plain = plain and not isinstance(getattr(chain.module, "padding", None), str)  # the kernels read numbers
    init = twins(t) if plain and not chain.bn else None
    if init is not None:
        return init, "", ""
    c_in = weight.shape[1] * g.groups
    lines, prelude = reference_init(t.problem.__file__, "the reference's parameters and BatchNorm statistics")
    lines += [
        f"self.{name} = nn.Conv{nd}d({c_in}, {weight.shape[0]}, {tuple(weight.shape[2:])}, "
        f"stride={g.stride}, padding={g.padding}, dilation={g.dilation}, groups={g.groups}, "
        f"bias={g.bias is not None})",
        f"self.{name}.weight = self.reference.get_parameter({g.weight!r})",
    ]
    if g.bias is not None:
        lines.append(f"self.{name}.bias = self.reference.get_parameter({g.bias!r})")
    bn = f"reference.{chain.bn}" if chain.bn else ""
    return lines, bn, prelude


def _name(chain: _Chain) -> str:
    return str(chain.conv.target).replace(".", "_") if chain.module is not None else "conv"


def _attr(t: Traced, chain: _Chain, name: str) -> str:
    """The template's `self.<attr>`: the convolution module, or its geometry bound to the inputs."""
    if chain.geometry.weight_input is None:
        return name
    weight, bias = _operands(t, chain, name)
    return f"{name}.bind({weight}, {bias}{_bound_bn(t, chain)})"


def _operands(t: Traced, chain: _Chain, name: str) -> tuple[str, str]:
    """Forward's expressions of the convolution's weight and bias: the inputs, else module `name`'s."""
    g = chain.geometry
    if g.weight_input is None:
        return f"self.{name}.weight", f"self.{name}.bias"
    return t.arg(g.weight_input), t.arg(g.bias_input) if g.bias_input is not None else "None"


# the module-level class of a convolution whose weight and bias are forward inputs
CONV_OPERANDS = '''
class ConvOperands:
    """A convolution's geometry as nn.Conv1d / nn.Conv2d holds it; `bind` adds the weight and bias
    (forward inputs here) for one call."""

    def __init__(self, out_channels, kernel_size, stride, padding, dilation, groups):
        self.geometry = (out_channels, kernel_size, stride, padding, dilation, groups)
        self.out_channels, self.kernel_size, self.stride = out_channels, kernel_size, stride
        self.padding, self.dilation, self.groups = padding, dilation, groups
        self.padding_mode, self.weight, self.bias = "zeros", None, None

    def bind(self, weight, bias, batch_norm=None):
        """A copy with the weight, bias and an eval-mode BatchNorm's (mean, var, weight, bias, eps,
        affine) bound, as the kernels' `_epilogue` reads them."""
        bound = ConvOperands(*self.geometry)
        bound.weight, bound.bias, bound.batch_norm = weight, bias, batch_norm
        return bound
'''


def draft_depthwise(t: Traced) -> str | None:
    """A depthwise Conv2d or Conv1d chain (groups equal to its input and output channels; see the
    module docstring) over one input; a 1-D one runs the 2-D stencil on rows of height 1."""
    chain = _match_chain(t)
    checked = None if chain is None else _checked(t, chain)
    if chain is None or checked is None:
        return None
    weight, nd = checked
    if weight.shape[1] != 1 or weight.shape[0] != chain.geometry.groups:
        return None
    name = _name(chain)
    init, bn, prelude = _weights(t, chain, weight, name)
    out_w = shape_of(t.out)[-1]  # type: ignore[index]
    residual = t.arg(chain.residual) if chain.residual is not None else None
    attr, x = _attr(t, chain, name), t.arg(chain.x)
    if nd == 1:  # [N, C, L] as [N, C, 1, L]: a geometry of height 1 bound to the weight viewed so
        attr, geometry = _rows_of_one(t, chain, name, int(weight.shape[-1]))
        init = [*init, f"self.{name}_rows = ConvOperands({geometry})"]
        prelude = prelude if "class ConvOperands" in prelude else f"{prelude}\n{CONV_OPERANDS}"
        x, residual = f"{x}.unsqueeze(2)", f"{residual}.unsqueeze(2)" if residual else None
    source = templates_depthwise.depthwise(
        t.args, x, attr, init, weight.shape[0], out_w, bn, chain.act, prelude, residual
    )
    if nd == 1:
        head, sep, tail = source.rpartition("        return y\n")
        source = head + "        return y.squeeze(2)\n" + tail if sep else source
    return source


def _rows_of_one(t: Traced, chain: _Chain, name: str, k: int) -> tuple[str, str]:
    """(the template's attr, the 2-D ConvOperands geometry) of a 1-D depthwise chain of `k` taps:
    weight [C, 1, K] bound as [C, 1, 1, K], stride, padding and dilation (1, s), (0, p), (1, d)."""
    g = chain.geometry
    weight, bias = _operands(t, chain, name)
    channels = g.groups
    taps = f"(1, {k}), (1, {g.stride[0]}), (0, {g.padding[0]}), (1, {g.dilation[0]})"
    attr = f"{name}_rows.bind({weight}.unsqueeze(2), {bias}{_bound_bn(t, chain)})"
    return attr, f"{channels}, {taps}, {channels}"


def _bound_bn(t: Traced, chain: _Chain) -> str:
    """`ConvOperands.bind`'s BatchNorm argument (with its leading comma) for statistics that are
    inputs, else nothing."""
    if not chain.bn_inputs:
        return ""
    *stats, eps = chain.bn_inputs
    names = ", ".join(t.arg(s) if s is not None else "None" for s in stats)
    return f", ({names}, {eps!r}, {stats[2] is not None})"


def draft_conv(t: Traced) -> str | None:
    """A convolution chain (see the module docstring) over one input, computed in the input's dtype."""
    chain = _match_chain(t)
    checked = None if chain is None else _checked(t, chain)
    if chain is None or checked is None:
        return None
    weight, _ = checked
    name = _name(chain)
    init, bn, prelude = _weights(t, chain, weight, name)
    residual = t.arg(chain.residual) if chain.residual is not None else None
    attr = _attr(t, chain, name)
    # groups > 1 (a depthwise one is drafted before, by draft_depthwise): packs of whole groups a program
    grouped = chain.geometry.groups != 1
    build = templates_conv_grouped.conv_grouped if grouped else templates_conv_seed.conv_seed
    return build(t.args, t.arg(chain.x), attr, init, bn, chain.act, prelude, residual)


def draft_conv_transpose(t: Traced) -> str | None:
    """One nn.ConvTranspose1d / nn.ConvTranspose2d module (groups 1, zero padding) applied to an input
    and returned: the per-phase template (`templates/conv/transpose.py`), the module read from the
    reference built in ModelNew (its seeded weights)."""
    if len(t.ops) != 1 or t.out is not t.ops[0] or len(t.ph) != 1:
        return None
    n = t.ops[0]
    mod = t.module(n)
    if not isinstance(mod, nn.ConvTranspose1d | nn.ConvTranspose2d) or n.args != (t.ph[0],) or n.kwargs:
        return None
    if mod.groups != 1 or mod.padding_mode != "zeros" or isinstance(mod.padding, str):
        t.notes.append("a transposed convolution with groups, non-zero padding modes or string padding")
        return None
    if not (dtype_of(t.ph[0]) == dtype_of(t.out) == mod.weight.dtype) or rank_of(t.ph[0]) != mod.weight.dim():
        return None
    init, prelude = reference_init(t.problem.__file__, "the transposed convolution's parameters")
    return templates_transpose.conv_transpose(t.args, t.arg(t.ph[0]), f"reference.{n.target}", init, prelude)


_POOL_MODULES = {
    nn.MaxPool1d: (1, True),
    nn.MaxPool2d: (2, True),
    nn.AvgPool1d: (1, False),
    nn.AvgPool2d: (2, False),
}
_MAX_ARGS = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
_AVG_ARGS = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
_POOL_FUNCTIONS: dict[Any, tuple[int, bool]] = {
    F.max_pool1d: (1, True),
    F.max_pool2d: (2, True),
    torch.max_pool1d: (1, True),
    torch.max_pool2d: (2, True),
    F.avg_pool1d: (1, False),
    F.avg_pool2d: (2, False),
}


def draft_pool(t: Traced) -> str | None:
    """A max or average pooling module or function (1-D over NCL, 2-D over NCHW) of an input, or of
    elementwise ops of one input (Inductor fuses a ReLU into the pool), as the whole reference: kegen's
    pooling template (`templates/conv/pool.py`), where it covers the op's options."""
    if not t.ops or t.ops[-1] is not t.out or len(t.ph) != 1:
        return None
    n, x = t.ops[-1], t.ph[0]
    src, before = (n.args[0] if n.args else None), t.ops[:-1]
    # elementwise ops of the input before the pool run on each loaded tile
    if before:
        prologue = chain(t, before, {x: "v"}) if src is before[-1] else None
    else:
        prologue = ([], "v") if src is x else None
    if prologue is None or dtype_of(t.out) != dtype_of(x):
        return None
    module = t.module(n) if n.op == "call_module" else None
    if module is not None:
        kind = _POOL_MODULES.get(type(module))
        params = dict(vars(module)) if kind is not None else {}
    else:
        try:
            kind = _POOL_FUNCTIONS.get(n.target)
        except TypeError:  # an unhashable target
            kind = None
        names = (_MAX_ARGS if kind[1] else _AVG_ARGS) if kind is not None else ()
        params = dict(zip(names, n.args[1:], strict=False)) | dict(n.kwargs)
        if kind is None or len(n.args) - 1 > len(names) or set(n.kwargs) - set(names):
            return None
    if kind is None or rank_of(x) != kind[0] + 2:
        return None
    keys = (*_MAX_ARGS, "count_include_pad", "divisor_override")
    spec = templates_pool.spec_of(kind[0], kind[1], **{k: params[k] for k in keys if k in params})
    if spec is None:
        return None
    spec = replace(spec, prologue=tuple(prologue[0]), value=prologue[1])
    return templates_pool.pool(spec, t.args, t.arg(x))
