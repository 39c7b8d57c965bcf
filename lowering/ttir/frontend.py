"""A Triton ``@jit`` function → TTIR text (Triton's own frontend and TTIR passes; no GPU) → tile IR.

The one path from ``@jit`` to TTIR, shared by the mtia backend's ``ttir`` stage, ``kegen lower`` and
the corpus: ``ASTSource.make_ir`` (Python AST → ``tt``/``arith``/``scf`` MLIR) with the target
backend's options, codegen hooks and libdevice map, then `add_ttir_cleanup_passes` (the TTIR pass
list of Triton's NVIDIA backend: inliner, tensor-pointer rewrite, canonicalize, combine,
reorder-broadcast, CSE, symbol DCE, loop unroll), which the mtia backend's ``make_ttir`` runs too.
The default target is mtia (`DEFAULT_TARGET`), so with default `FrontendOptions` the text equals the
``ttir`` artifact of ``triton.compile(..., target=mtia)``. Any `GPUTarget` whose backend Triton finds
can be passed instead, e.g. ``GPUTarget("cuda", 90, 32)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lowering.ir.module import Module
from lowering.ttir.errors import FrontendError
from lowering.ttir.parser import parse_ttir

__all__ = [
    "FrontendOptions",
    "ttir_from_jit",
    "module_from_jit",
    "timed_ttir_from_jit",
    "add_ttir_cleanup_passes",
]


@dataclass(frozen=True)
class FrontendOptions:
    """How TTIR is produced.

    `rewrite_tensor_pointer`: lower ``tt.make_tensor_ptr``/``tt.advance`` block pointers to
    pointer tensors (Triton's NVIDIA pipeline and the mtia backend do); `rewrite_tensor_descriptor`:
    likewise for tensor descriptors (neither backend does it in its ttir stage); `run_passes`: False
    gives the frontend's raw output (no clean-up at all); `num_warps`: passed to the backend options
    (None: the backend's default; affects nothing in TTIR but the module attributes); `debug`:
    Triton's debug mode (keeps ``tl.device_assert`` as ``tt.assert``). The defaults are the mtia
    backend's own choices.
    """

    rewrite_tensor_pointer: bool = True
    rewrite_tensor_descriptor: bool = False
    run_passes: bool = True
    locations: bool = True
    num_warps: int | None = None
    debug: bool = False


def add_ttir_cleanup_passes(
    pm: Any, *, rewrite_tensor_pointer: bool = True, rewrite_tensor_descriptor: bool = False
) -> None:
    """Add the TTIR clean-up pass list of Triton's NVIDIA backend (its ``make_ttir`` stage) to the
    Triton pass manager `pm`; the defaults are that backend's choices."""
    from triton._C.libtriton import passes

    from lowering import compat

    passes.common.add_inliner(pm)
    if rewrite_tensor_pointer:  # a no-op from Triton 3.8 on (its frontend emits no block pointers)
        compat.add_rewrite_tensor_pointer(passes.ttir, pm)
    if rewrite_tensor_descriptor:
        passes.ttir.add_rewrite_tensor_descriptor_to_pointer(pm)
    passes.common.add_canonicalizer(pm)
    passes.ttir.add_combine(pm)
    passes.ttir.add_reorder_broadcast(pm)
    passes.common.add_cse(pm)
    passes.common.add_symbol_dce(pm)
    passes.ttir.add_loop_unroll(pm)


DEFAULT_TARGET = ("mtia", "2i", 1)


def _target(target: Any) -> Any:
    from triton.backends.compiler import GPUTarget

    return target if target is not None else GPUTarget(*DEFAULT_TARGET)


def _attrs_for(fn: Any, divisible_by_16: Iterable[str]) -> dict[tuple[int, ...], list[list[Any]]] | None:
    names = list(divisible_by_16)
    if not names:
        return None
    arg_names = list(fn.arg_names)
    out: dict[tuple[int, ...], list[list[Any]]] = {}
    for n in names:
        if n not in arg_names:
            raise FrontendError(
                f"divisible_by_16 names {n!r}, which is not an argument of {fn.__name__} "
                f"(arguments: {', '.join(arg_names)})"
            )
        out[(arg_names.index(n),)] = [["tt.divisibility", 16]]
    return out


def ttir_from_jit(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    *,
    divisible_by_16: Iterable[str] = (),
    target: Any = None,
    options: FrontendOptions | None = None,
) -> str:
    """TTIR text of a ``@triton.jit`` function.

    `signature` maps every non-constexpr argument to a Triton type string (``"*fp32"``, ``"i32"``,
    ``"fp16"``, ``"i1"``, ...); constexpr arguments go in `constexprs` (they may be left out of
    `signature`). `divisible_by_16` lists pointer/int arguments Triton may assume 16-divisible (the
    ``tt.divisibility`` argument attribute, as specialization gives on a GPU).
    Raises `FrontendError` with Triton's message when the kernel does not compile.
    """
    return _ttir(fn, signature, constexprs, divisible_by_16, target, options or FrontendOptions())[0]


def timed_ttir_from_jit(
    fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None = None, **kw: Any
) -> tuple[str, float]:
    """`ttir_from_jit` and the seconds Triton spent (frontend + TTIR passes, not printing)."""
    text, seconds = _ttir(
        fn,
        signature,
        constexprs,
        kw.get("divisible_by_16", ()),
        kw.get("target"),
        kw.get("options") or FrontendOptions(),
    )
    return text, seconds


def _ttir(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None,
    divisible_by_16: Iterable[str],
    target: Any,
    opts: FrontendOptions,
) -> tuple[str, float]:
    try:
        from triton._C.libtriton import ir
        from triton.compiler import ASTSource
        from triton.compiler.compiler import make_backend
    except Exception as exc:  # Triton itself failed to import (e.g. a broken backend plug-in)
        raise FrontendError(f"cannot import Triton: {exc}") from exc
    if not hasattr(fn, "arg_names") or not hasattr(fn, "fn"):
        raise FrontendError(f"{getattr(fn, '__name__', fn)!r} is not a @triton.jit function")
    constexprs = dict(constexprs or {})
    sig = dict(signature)
    for name in constexprs:
        sig.setdefault(name, "constexpr")
    missing = [a for a in fn.arg_names if a not in sig]
    if missing:
        raise FrontendError(
            f"signature of {fn.__name__} lacks argument(s) {', '.join(missing)}; give each a "
            f'Triton type ("*fp32", "i32", ...) or a constexpr value'
        )
    unknown = [a for a in sig if a not in fn.arg_names]
    if unknown:
        raise FrontendError(
            f"signature names {', '.join(unknown)}, not arguments of {fn.__name__} "
            f"(arguments: {', '.join(fn.arg_names)})"
        )
    tgt = _target(target)
    try:
        backend = make_backend(tgt)
        src = ASTSource(fn, sig, constexprs, _attrs_for(fn, divisible_by_16))
        raw: dict[str, Any] = {"debug": opts.debug}
        if opts.num_warps is not None:
            raw["num_warps"] = opts.num_warps
        options = backend.parse_options(raw)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        codegen_fns = backend.get_codegen_implementation(options)
        module_map = backend.get_module_map()
        start = time.perf_counter()
        module = src.make_ir(tgt, options, codegen_fns, module_map, context)
        if opts.run_passes:
            pm = ir.pass_manager(module.context)
            add_ttir_cleanup_passes(
                pm,
                rewrite_tensor_pointer=opts.rewrite_tensor_pointer,
                rewrite_tensor_descriptor=opts.rewrite_tensor_descriptor,
            )
            pm.run(module, "make_ttir")
        seconds = time.perf_counter() - start
        text = module.str() if opts.locations else module.str_nodebug()
    except FrontendError:
        raise
    except Exception as exc:
        raise FrontendError(
            f"Triton could not compile {fn.__name__} to TTIR: {type(exc).__name__}: {exc}"
        ) from exc
    return str(text), seconds


def module_from_jit(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    *,
    divisible_by_16: Iterable[str] = (),
    target: Any = None,
    options: FrontendOptions | None = None,
) -> Module:
    """`ttir_from_jit` then `parse_ttir`: the kernel as a tile-IR `Module`."""
    return parse_ttir(
        ttir_from_jit(
            fn, signature, constexprs, divisible_by_16=divisible_by_16, target=target, options=options
        )
    )


JitFunction = Callable[..., Any]
