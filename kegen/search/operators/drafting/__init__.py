"""Drafting a first candidate from the PyTorch reference (no seed given).

The reference model is traced with torch.fx (shapes propagated) and matched against RULES, a table
of (name, op class, pattern): the first pattern that recognises the whole graph writes the
candidate from its Triton template. The op classes:

- elementwise chains over same-shape inputs, or broadcasting row/column vectors and scalars;
- last-dim softmax, log-softmax, reductions (sum, mean, max/amax, argmax) and cumsum; sum, mean
  and max over dim 0 of a 2-D tensor (column reductions);
- GroupNorm (nn.GroupNorm, F.group_norm) with an elementwise epilogue such as SiLU (drafting.group_norm);
- LayerNorm (nn.LayerNorm; F.layer_norm with input weight/bias, of an input or a residual sum) and
  RMSNorm (nn.RMSNorm, F.rms_norm, or written with torch ops and confirmed numerically);
- transposes of the last two dims; views and one copy of an input (a permute of leading dims made
  contiguous: attention's head split and merge) as a strided row copy;
- matmul / mm / bmm (operands may be transposed views or fp32 upcasts) with an elementwise epilogue
  that may read a bias row, a residual or a scalar input;
- stacks of nn.Linear / F.linear layers, each with its bias and activation fused;
- weight-only quantized linear layers (an int8/uint8 weight cast and scaled per output channel in the
  forward), the integers read in the GEMM's loop (drafting.quant); packed 4-bit weights in any layout,
  recognised by the weight the reference computes (drafting.quant_packed);
- attention over the inputs in any spelling (F.scaled_dot_product_attention, or matmuls around a
  softmax with a scale, a causal or additive mask and fp32 upcasts), confirmed numerically against
  torch's attention (drafting.attention);
- convolution chains: a Conv1d / Conv2d module or F.conv1d / F.conv2d on a parameter (any stride
  and dilation), then an eval-mode BatchNorm, a residual input and an activation (ReLU, ReLU6, SiLU,
  GELU, Hardswish, sigmoid), fp32 upcasts allowed: depthwise 2-D ones (groups equal to the channels)
  as a stencil, groups 1 as the implicit-GEMM seed the convolution moves rewrite;
- rotary position embeddings in any spelling (halves or interleaved pairs, tables as buffers or
  inputs), confirmed numerically (drafting.rope);
- nearest-neighbour upsampling by power-of-two factors in any spelling, confirmed numerically
  (drafting.upsample);
- top-k routing (a softmax or not, the k largest values and/or their positions, renormalised or
  not: mixture-of-experts routers), confirmed numerically (drafting.router);
- row gathers (index_select on dim 0, F.embedding, nn.Embedding), from an input or a parameter;
  embedding bags with offsets (F.embedding_bag, nn.EmbeddingBag; sum or mean).

Modules and parameters of the model are rebuilt in ModelNew.__init__ only where seeded construction
provably gives equal values (checked at draft time); a convolution chain whose weights cannot be
rebuilt so (BatchNorm statistics set in `__init__`, a raw parameter) builds the reference itself,
its source embedded as `Reference`.

Before the patterns run, reads of a traced tensor's dtype and sizes (`.to(x.dtype)`, `x.shape[-1]`)
are folded to their values (`graph.fold_metadata`), and an aten graph (a `kegen tune` kernel group) is
lifted to torch-level ops (drafting.aten); the patterns read fp32 upcasts of inputs and parameters and
the final cast back, as the suites' references are written.

Anything else is reported by name as not draftable.

This module holds the rule table, the public API and the refusal message; the patterns live in
the sub-modules rows (row-wise ops), norms, elementwise, layout, matmul and gather, over the traced
graph of graph; weights rebuilds parameters. The Triton text comes from kegen.search.operators.templates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.fx import Node

from kegen.search.operators.dot_precision import for_target
from kegen.search.operators.drafting import output_views
from kegen.search.operators.drafting.aten import Lifted, NotLiftable, copy_graph, wrap
from kegen.search.operators.drafting.attention import SUMMARY as ATTENTION_SUMMARY
from kegen.search.operators.drafting.attention import draft_attention
from kegen.search.operators.drafting.conv import draft_conv, draft_conv_transpose, draft_depthwise, draft_pool
from kegen.search.operators.drafting.elementwise import draft_broadcast, draft_elementwise
from kegen.search.operators.drafting.gather import draft_embedding_bag, draft_gather
from kegen.search.operators.drafting.graph import (
    KNOWN_MODULES,
    KNOWN_TARGETS,
    DraftError,
    Drafts,
    Traced,
    load_problem_module,
    op_name,
    trace,
    traced_graph,
)
from kegen.search.operators.drafting.group_norm import draft_group_norm
from kegen.search.operators.drafting.layout import draft_layout_copy, draft_transpose
from kegen.search.operators.drafting.matmul import draft_linear, draft_matmul
from kegen.search.operators.drafting.norms import (
    draft_layer_norm,
    draft_layer_norm_fn,
    draft_rms_norm_formula,
    draft_rms_norm_op,
)
from kegen.search.operators.drafting.quant import draft_dequant_linear
from kegen.search.operators.drafting.quant_packed import draft_packed_linear
from kegen.search.operators.drafting.rope import SUMMARY as ROPE_SUMMARY
from kegen.search.operators.drafting.rope import draft_rope
from kegen.search.operators.drafting.router import SUMMARY as ROUTER_SUMMARY
from kegen.search.operators.drafting.router import draft_router
from kegen.search.operators.drafting.rows import (
    draft_argmax,
    draft_col_reduce,
    draft_cumsum,
    draft_fused_reduce,
    draft_log_softmax,
    draft_reduce,
    draft_softmax,
    draft_softmax_dim,
)
from kegen.search.operators.drafting.upsample import SUMMARY as UPSAMPLE_SUMMARY
from kegen.search.operators.drafting.upsample import draft_upsample

__all__ = [
    "RULES",
    "Analysis",
    "Draft",
    "DraftError",
    "Rule",
    "analyze",
    "draft_candidate",
    "draft_seeds",
    "load_problem_module",
    "template_drafts",
]


@dataclass
class Analysis:
    """What the drafter recognised in the reference."""

    op_class: str | None
    ops: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    source: str | None = None
    variants: list[tuple[str, str]] = field(default_factory=list)  # other drafts: (what differs, source)

    @property
    def summary(self) -> str:
        s = f"{self.op_class or 'unrecognised'}: {', '.join(self.ops) or '-'}"
        if self.unsupported:
            s += f" (cannot draft: {', '.join(self.unsupported)})"
        return s


@dataclass(frozen=True)
class Rule:
    """A pattern over the traced graph and the op class of the candidate it drafts."""

    name: str
    op_class: str
    match: Callable[[Traced], str | Drafts | None]  # Drafts: the source and other drafts of it


RULES: tuple[Rule, ...] = (
    Rule("layer_norm", "normalization", draft_layer_norm),
    Rule("layer_norm_fn", "normalization", draft_layer_norm_fn),
    Rule("rms_norm", "normalization", draft_rms_norm_op),
    Rule("rms_norm_formula", "normalization", draft_rms_norm_formula),
    Rule("group_norm", "normalization", draft_group_norm),
    Rule("softmax", "softmax", draft_softmax),
    Rule("log_softmax", "softmax", draft_log_softmax),
    Rule("softmax_dim", "softmax", draft_softmax_dim),
    Rule("reduction", "reduction", draft_reduce),
    Rule("column_reduction", "reduction", draft_col_reduce),
    Rule("fused_reduction", "reduction", draft_fused_reduce),
    Rule("argmax", "reduction", draft_argmax),
    Rule("cumsum", "scan", draft_cumsum),
    Rule("transpose", "elementwise", draft_transpose),
    Rule("layout_copy", "elementwise", draft_layout_copy),
    Rule("dequant_linear", "matmul", draft_dequant_linear),
    Rule("packed_linear", "matmul", draft_packed_linear),
    Rule("matmul", "matmul", draft_matmul),
    Rule("linear", "matmul", draft_linear),
    Rule("gather", "gather", draft_gather),
    Rule("embedding_bag", "embedding", draft_embedding_bag),
    Rule("depthwise_conv", "convolution", draft_depthwise),
    Rule("conv", "convolution", draft_conv),
    Rule("conv_transpose", "convolution", draft_conv_transpose),
    Rule("pool", "reduction", draft_pool),
    Rule("elementwise", "elementwise", draft_elementwise),
    Rule("broadcast", "elementwise", draft_broadcast),
)


# recognisers that run the reference and compare its output: (drafter, op class, summary)
NUMERIC: tuple[tuple[Callable[[Path], str | None], str, str], ...] = (
    (draft_attention, "attention", ATTENTION_SUMMARY),
    (draft_rope, "elementwise", ROPE_SUMMARY),
    (draft_upsample, "elementwise", UPSAMPLE_SUMMARY),
    (draft_router, "reduction", ROUTER_SUMMARY),
)


def analyze(problem_path: Path) -> Analysis:
    """Trace the reference and produce a candidate from templates where the graph is recognised;
    the ops recognised by their output (NUMERIC: attention, RoPE, upsampling, top-k routing in any
    spelling, also ones torch.fx cannot trace) are tried first."""
    for recognise, op_class, summary in NUMERIC:
        try:
            source = recognise(problem_path)
        except Exception:  # a recogniser only: the rules below still run
            source = None
        if source is not None:
            return Analysis(op_class, [summary], [], source)
    try:
        t = trace(problem_path)
    except Exception as exc:
        return Analysis(
            None, unsupported=[f"reference cannot be traced with torch.fx ({type(exc).__name__}: {exc})"]
        )
    names = [op_name(n.target) if n.op != "call_module" else type(t.module(n)).__name__ for n in t.ops]
    found = _match_rules(t, names, t.lifted)
    viewed = _without_output_views(t) if found is None and t.lifted is None else None
    if viewed is not None:  # an op whose result the reference returns through views (heads split)
        core, views = viewed
        found = _match_rules(core, names, views)
    if found is not None:
        return found
    bad = [nm for n, nm in zip(t.ops, names, strict=True) if not _known(t, n)]
    return Analysis(None, names, sorted(set(bad)) or t.notes or ["this combination of ops"])


def _match_rules(t: Traced, names: list[str], views: Lifted | None) -> Analysis | None:
    """The first rule's draft of `t` (and its variants), with `views` (the ones moved out of the graph)
    applied in their forwards; why a pattern that nearly matched refused goes to `t.notes`."""
    for rule in RULES:
        try:
            found = rule.match(t)
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            t.notes.append(f"pattern {rule.name} failed on this graph ({type(exc).__name__}: {exc})")
            continue
        if found is None:
            continue
        drafts = found if isinstance(found, Drafts) else Drafts(found)
        source, variants = drafts.source, list(drafts.variants)
        if views is not None:
            try:
                source = wrap(source, t.args, views)
            except NotLiftable:
                continue
            variants = _wrapped(variants, t.args, views)
        return Analysis(rule.op_class, names, [], source, variants)
    return None


def _wrapped(variants: list[tuple[str, str]], args: list[str], views: Lifted) -> list[tuple[str, str]]:
    """The variants with `views` applied in their forwards; a variant that cannot take them is dropped."""
    out = []
    for what, source in variants:
        try:
            out.append((what, wrap(source, args, views)))
        except NotLiftable:
            continue
    return out


def _without_output_views(t: Traced) -> tuple[Traced, Lifted] | None:
    """The reference with the views its outputs are read through cut off (`x.view(b, t, h, d)
    .transpose(1, 2)` of a projection, a fused QKV's `unbind`), and those views, which the candidate
    applies to what its kernels return (exact: views of the same storage); None when no output is a
    view of a computed tensor."""
    gm = copy_graph(t.gm)
    views = output_views.strip(gm, methods=True)
    if views is None or not any(chain for _, chain in views):
        return None
    gm.recompile()
    core = traced_graph(t.problem, t.model, gm, t.inputs)
    return core, Lifted(output_views=views, single_output=t.out is not None)


def _known(t: Traced, n: Node) -> bool:
    if n.op == "call_module":
        return isinstance(t.module(n), KNOWN_MODULES)
    try:
        return n.target in KNOWN_TARGETS
    except TypeError:  # an unhashable target
        return False


def draft_candidate(problem_path: Path) -> tuple[str, Analysis]:
    """A first candidate for the problem, or DraftError naming the ops that have no template."""
    a = analyze(problem_path)
    if a.source is None:
        graph = f" (the reference computes: {', '.join(a.ops)})" if a.ops else ""
        raise DraftError(
            f"the offline operator cannot draft {problem_path}: no Triton template for "
            f"{', '.join(a.unsupported)}{graph}. Pass a hand-written --seed candidate, or use --operator llm."
        )
    return a.source, a


@dataclass(frozen=True)
class Draft:
    """One drafted first candidate: its source, where it came from (`inductor` or `template:<class>`)
    and a description for the search tree."""

    source: str
    origin: str
    description: str


def _gpu_inductor_draft(problem_path: Path, target: str) -> Draft | None:
    """torch.compile's code for this machine's GPU (`compile_candidate.gpu_drafter`) where the search
    targets one and Inductor's mtia draft cannot be made here (a GPU machine); None otherwise."""
    from kegen.search.compile_candidate import TARGETS, gpu_drafter

    if target not in TARGETS:
        return None
    try:
        source = gpu_drafter(Path(problem_path), target)
    except Exception:  # no GPU here, or a library op without a Triton form: the templates may still draft
        return None
    what = f"drafted by TorchInductor for this {target} GPU (torch.compile's code)"
    return Draft(source, "inductor:gpu", what)


def _native_inductor_draft(problem_path: Path) -> Draft | None:
    """Inductor's draft of a reference that upcasts its fp16/bf16 operands (`x.float()`: exact on a
    CPU host) computed in the operands' own dtype, as the model it stands for runs: no float32 copies
    of the weights and activations, fp16/bf16 GEMMs accumulating in float32. None where the reference
    does not upcast, the outputs' dtypes would change, or Inductor cannot draft it."""
    from kegen.bench.native_dtype import native_float, native_keeps_dtypes, reference_upcasts
    from kegen.inductor.capture import CaptureError
    from kegen.inductor.draft import draft_from_inductor

    if not (reference_upcasts(problem_path) and native_keeps_dtypes(problem_path)):
        return None
    try:
        with native_float():
            source, info = draft_from_inductor(problem_path)
    except CaptureError:
        return None
    what = f"drafted by TorchInductor in the operands' dtype, no float32 upcasts ({_kernels(info)})"
    return Draft(source, "inductor:native", what)


def _kernels(info: Any) -> str:
    """The kernels an Inductor draft holds, for its description."""
    return ", ".join(info.kernels + info.extern) or "no kernels"


def template_drafts(a: Analysis, problem_path: Path, target: str) -> list[Draft]:
    """The template drafts of an analysis (its source, then its variants), for `target`."""
    if a.source is None:
        return []
    origin = f"template:{a.op_class}"
    what = f"drafted from a template ({a.summary})"
    drafts = [Draft(for_target(a.source, target, problem_path), origin, what)]
    for variant, source in a.variants:
        what = f"drafted from a template ({a.summary}; {variant})"
        drafts.append(Draft(for_target(source, target, problem_path), f"{origin}:variant", what))
    return drafts


def draft_seeds(
    problem_path: Path, inductor: bool = True, templates: bool = True, target: str = "mtia"
) -> tuple[list[Draft], Analysis]:
    """Every draft of the problem, the default first: TorchInductor's (kegen.inductor.draft), its
    draft in the operands' own dtype where the reference upcasts fp16/bf16 operands, then kegen's
    hand-written template where one matches. Raises DraftError naming what blocks each
    drafter when neither produces one."""
    drafts: list[Draft] = []
    refusals: list[str] = []
    if inductor:
        from kegen.inductor.capture import CaptureError
        from kegen.inductor.draft import draft_from_inductor

        try:
            source, info = draft_from_inductor(problem_path)
            drafts.append(Draft(source, "inductor", f"drafted by TorchInductor ({_kernels(info)})"))
        except CaptureError as exc:
            gpu = _gpu_inductor_draft(problem_path, target)  # a GPU machine drafts for its GPU
            if gpu is None:
                refusals.append(f"TorchInductor: {exc}")
            else:
                drafts.append(gpu)
        native = _native_inductor_draft(problem_path)
        if native is not None and all(native.source != d.source for d in drafts):
            drafts.append(native)
    a = analyze(problem_path) if templates else Analysis(None)
    if templates and a.source is not None:
        drafts += template_drafts(a, problem_path, target)
    elif templates:
        refusals.append(f"templates: no Triton template for {', '.join(a.unsupported)}")
    if not drafts:
        raise DraftError(
            f"kegen cannot draft {problem_path}: "
            + "; ".join(refusals)
            + ". Pass a hand-written --seed candidate, or use --operator llm."
        )
    return drafts, a
