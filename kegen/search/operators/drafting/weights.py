"""Rebuilding the reference model's weights in ModelNew.__init__: constructor calls (nn.Linear,
nn.LayerNorm, nn.RMSNorm, nn.Embedding, nn.EmbeddingBag, nn.Conv1d, nn.Conv2d,
nn.Parameter(torch.randn/rand/ones/zeros)) accepted only where seeded construction provably gives the
reference's values (checked at draft time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from kegen.search.operators.drafting.graph import Traced

_PARAM_INITS = ("torch.randn", "torch.rand", "torch.ones", "torch.zeros")


def module_ctor(m: nn.Module) -> str | None:
    """The constructor call that rebuilds module `m` (its weights equal under the same RNG state)."""
    if isinstance(m, nn.Linear):
        ctor = f"nn.Linear({m.in_features}, {m.out_features}, bias={m.bias is not None})"
    elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
        bias = m.bias is not None
        ctor = f"nn.LayerNorm({tuple(m.normalized_shape)}, eps={m.eps!r}, bias={bias})"
    elif isinstance(m, nn.RMSNorm):
        ctor = f"nn.RMSNorm({tuple(m.normalized_shape)}, eps={m.eps!r}, elementwise_affine=True)"
    elif isinstance(m, nn.Embedding) and m.padding_idx is None and m.max_norm is None:
        ctor = f"nn.Embedding({m.num_embeddings}, {m.embedding_dim})"
    elif isinstance(m, nn.Conv1d | nn.Conv2d) and m.padding_mode == "zeros" and isinstance(m.padding, tuple):
        ctor = (
            f"nn.{type(m).__name__}({m.in_channels}, {m.out_channels}, {tuple(m.kernel_size)}, "
            f"stride={tuple(m.stride)}, "
            f"padding={tuple(m.padding)}, dilation={tuple(m.dilation)}, groups={m.groups}, "
            f"bias={m.bias is not None})"
        )
    elif isinstance(m, nn.EmbeddingBag) and m.max_norm is None:
        pad = f", padding_idx={m.padding_idx}" if m.padding_idx is not None else ""
        ctor = f"nn.EmbeddingBag({m.num_embeddings}, {m.embedding_dim}, mode={m.mode!r}{pad})"
    else:
        return None
    dtype = next(m.parameters()).dtype
    return ctor if dtype == torch.float32 else f"{ctor}.to({dtype})"


def twins(t: Traced) -> list[str] | None:
    """`__init__` lines that rebuild the model's parameters (nn.Linear, nn.RMSNorm, nn.Embedding and
    the model's own nn.Parameter(torch.randn/rand/ones/zeros(shape))) so that the evaluator's seeded
    construction gives ModelNew equal values; None (and a note) when they would not be equal."""
    modules = [(path, m) for path, m in t.model.named_modules() if path and list(m.parameters(recurse=False))]
    for path, m in modules:
        if module_ctor(m) is None:
            t.notes.append(f"the parameters of {path} ({type(m).__name__}), which ModelNew cannot rebuild")
            return None
    params = [(name, p) for name, p in t.model.named_parameters(recurse=False)]
    for params_first in (True, False):
        lines = _rebuild(t, params, modules, params_first)
        if lines is not None:
            return lines
    t.notes.append("the model's weights, which seeded construction in ModelNew does not reproduce")
    return None


def _rebuild(
    t: Traced, params: list[tuple[str, Any]], modules: list[tuple[str, nn.Module]], params_first: bool
) -> list[str] | None:
    """Constructor lines that reproduce the reference weights in this construction order, or None."""
    torch.manual_seed(1234)
    ref = t.problem.Model(*t.problem.get_init_inputs())
    torch.manual_seed(1234)
    lines = []
    steps = [*((n, None) for n, _ in params), *((p, m) for p, m in modules)]
    if not params_first:
        steps = steps[len(params) :] + steps[: len(params)]
    for name, module in steps:
        theirs = (
            list(ref.get_submodule(name).parameters(recurse=False)) if module else [ref.get_parameter(name)]
        )
        candidates = (
            [str(module_ctor(module))]
            if module
            else [f"nn.Parameter({f}({tuple(theirs[0].shape)}))" for f in _PARAM_INITS]
        )
        state = torch.get_rng_state()
        for ctor in candidates:
            torch.set_rng_state(state)
            twin = eval(ctor, {"nn": nn, "torch": torch})  # noqa: S307 - our own text
            mine = list(twin.parameters()) if module else [twin]
            if len(mine) == len(theirs) and all(torch.equal(p, q) for p, q in zip(theirs, mine, strict=True)):
                lines.append(f"self.{name.replace('.', '_')} = {ctor}")
                break
        else:
            return None
    return lines


def reference_init(problem_file: str | Path, holds: str) -> tuple[list[str], str]:
    """(ModelNew.__init__ lines, module-level prelude) that build the reference itself as `Reference`
    for tensors seeded construction of standard modules cannot rebuild (quantized weights, tables,
    statistics); `holds` names them in the line's comment."""
    from kegen.inductor.draft import reference_source_of

    init = [f"self.reference = Reference(*args, **kwargs)  # {holds}"]
    return init, reference_source_of(Path(problem_file))


def tensor_expr(t: Traced, n: Any) -> str:
    """ModelNew.forward's expression of an input or of a model tensor (read from the built reference)."""
    return t.arg(n) if n.op == "placeholder" else reference_tensor(t.model, str(n.target))


def reference_tensor(model: nn.Module, path: str) -> str:
    """ModelNew.forward's expression of the model's buffer or parameter at dotted `path`, read from the
    reference `reference_init` builds."""
    getter = "get_buffer" if path in dict(model.named_buffers()) else "get_parameter"
    return f"self.reference.{getter}({path!r})"
