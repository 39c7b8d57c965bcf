"""`kegen lower`: compile one @triton.jit kernel for mtia (kegen's backend), nvidia or amd
(Triton's own backends, no GPU needed) and print or write any stage."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

TARGETS = ("mtia", "nvidia", "amd")
TEXT_STAGES = {
    "mtia": ("ttir", "tile", "llir", "rvasm"),
    "nvidia": ("ttir", "ttgir", "llir", "ptx"),
    "amd": ("ttir", "ttgir", "llir", "amdgcn"),
}
BINARY_STAGES = {"mtia": ("elf",), "nvidia": ("cubin",), "amd": ("hsaco",)}
DEFAULT_EMIT = {"mtia": "rvasm", "nvidia": "ptx", "amd": "amdgcn"}
DEFAULT_ARCH = {"mtia": "2i", "nvidia": "sm_90", "amd": "gfx942"}
_TYPE_RE = re.compile(
    r"^\*?(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp16|bf16|fp32|fp64)$"
)


class LowerUsageError(Exception):
    """A user mistake on the command line or in the kernel file (printed, exit status 1)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kernel_file", metavar="KERNEL.py", help="Python file defining the @triton.jit kernel"
    )
    parser.add_argument("--kernel", required=True, metavar="NAME", help="name of the @triton.jit function")
    parser.add_argument(
        "--signature",
        default="",
        metavar="'x_ptr=*fp32,n=i32'",
        help="Triton types of the runtime arguments, in any order",
    )
    parser.add_argument(
        "--constexpr",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of a tl.constexpr argument (repeat, or comma-separate)",
    )
    parser.add_argument("--target", choices=TARGETS, default="mtia")
    parser.add_argument("--arch", help="nvidia: sm_90 (default), amd: gfx942 (default), mtia: 2i|v1|300 "
                        "(default: the machine's)")
    parser.add_argument("--machine", help="mtia machine description: mtia-2i|mtia-v1|mtia-300 or a TOML path "
                        "(default: KEGEN_MACHINE or mtia-2i)")
    parser.add_argument(
        "--emit",
        help="stage to output: ttir|tile|llir|rvasm|elf (mtia), "
        "ttir|ttgir|llir|ptx|cubin (nvidia), ttir|ttgir|llir|amdgcn|hsaco (amd)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option, e.g. num_stages=2, dual_core=true, block_dma=false",
    )
    parser.add_argument("-o", "--output", help="write the stage to this file (required for binary stages)")


def _value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text.strip()


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            if "=" not in part:
                raise LowerUsageError(f"bad {what} {part!r}: expected NAME=VALUE")
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def load_kernel(path: str, name: str) -> Any:
    """The @triton.jit function `name` defined in the file `path`."""
    file = Path(path)
    if not file.is_file():
        raise LowerUsageError(f"no such kernel file: {path}")
    spec = importlib.util.spec_from_file_location(f"kegen_lower_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise LowerUsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - report any import failure of the user's file
        raise LowerUsageError(f"importing {path} failed: {type(exc).__name__}: {exc}") from None
    from triton.runtime.jit import JITFunction

    fn = getattr(module, name, None)
    while fn is not None and not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn  # autotuner / heuristics wrappers
    if not isinstance(fn, JITFunction):
        kernels = sorted(k for k, v in vars(module).items() if isinstance(v, JITFunction))
        raise LowerUsageError(
            f"{path} has no @triton.jit function {name!r}; it has: {', '.join(kernels) or 'none'}"
        )
    return fn


def build_signature(
    fn: Any, signature: str, constexprs: dict[str, str]
) -> tuple[dict[str, str], dict[str, Any]]:
    """Triton's (signature, constexprs) for `fn` from the command-line strings."""
    types = _pairs([signature], "signature entry") if signature else {}
    names = list(fn.arg_names)
    params = {p.name: p for p in fn.params}
    unknown = [k for k in list(types) + list(constexprs) if k not in names]
    if unknown:
        raise LowerUsageError(
            f"kernel {fn.__name__} has no argument {', '.join(unknown)}; its arguments are {', '.join(names)}"
        )
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    for n in names:
        if n in constexprs:
            sig[n] = "constexpr"
            consts[n] = _value(constexprs[n])
        elif params[n].is_constexpr:
            default = params[n].default
            if (
                default is params[n].__class__
                or default is None
                or str(default) == "<class 'inspect._empty'>"
            ):
                raise LowerUsageError(f"tl.constexpr argument {n} needs a value: --constexpr {n}=...")
            sig[n] = "constexpr"
            consts[n] = default
        elif n in types:
            t = types[n]
            if not _TYPE_RE.match(t):
                raise LowerUsageError(f"bad type {t!r} for {n}: use e.g. *fp32, *fp16, *bf16, i32, i64, fp32")
            sig[n] = t
        else:
            raise LowerUsageError(
                f"argument {n} of kernel {fn.__name__} needs a type in --signature "
                f"(e.g. {n}=*fp32 or {n}=i32)"
            )
    return sig, consts


def _target(target: str, arch: str | None) -> Any:
    from triton.backends.compiler import GPUTarget

    arch = arch or DEFAULT_ARCH[target]
    if target == "nvidia":
        m = re.fullmatch(r"(?:sm_?)?(\d+)a?", arch)
        if not m:
            raise LowerUsageError(f"bad nvidia arch {arch!r}: use e.g. sm_90 or sm_80")
        return GPUTarget("cuda", int(m.group(1)), 32)
    if target == "amd":
        if not arch.startswith("gfx"):
            raise LowerUsageError(f"bad amd arch {arch!r}: use e.g. gfx942 or gfx90a")
        return GPUTarget("hip", arch, 64)
    return GPUTarget("mtia", arch, 1)


def compile_kernel(args: argparse.Namespace) -> tuple[Any, str]:
    """Compile and return (Triton's CompiledKernel, the stage name to emit)."""
    import triton
    from triton.compiler import ASTSource

    emit = args.emit or DEFAULT_EMIT[args.target]
    stages = TEXT_STAGES[args.target] + BINARY_STAGES[args.target]
    if emit not in stages:
        raise LowerUsageError(
            f"--emit {emit} is not a stage of target {args.target}; choose from {', '.join(stages)}"
        )
    if emit in BINARY_STAGES[args.target] and not args.output:
        raise LowerUsageError(f"--emit {emit} is binary: give -o FILE")
    fn = load_kernel(args.kernel_file, args.kernel)
    sig, consts = build_signature(fn, args.signature, _pairs(args.constexpr, "constexpr"))
    options = {k: _value(v) for k, v in _pairs(args.option, "option").items()}
    arch = args.arch
    if args.target == "mtia":
        from kegen.settings import select_machine
        from lowering.backend.options import machine_arch

        machine = getattr(args, "machine", None)
        if machine or not arch:
            try:
                machine = select_machine(machine)
            except ValueError as exc:
                raise LowerUsageError(str(exc)) from None
            options.setdefault("machine", machine)
            arch = arch or machine_arch(machine)
    elif getattr(args, "machine", None):
        raise LowerUsageError(f"--machine is for --target mtia (target {args.target} takes --arch)")
    target = _target(args.target, arch)
    return triton.compile(ASTSource(fn, sig, consts), target=target, options=options), emit


def run(args: argparse.Namespace) -> int:
    from triton.compiler.errors import CompilationError

    from lowering.codegen.errors import LoweringError

    try:
        kernel, emit = compile_kernel(args)
    except (LowerUsageError, LoweringError) as exc:
        print(f"kegen lower: error: {exc}", file=sys.stderr)
        return 1
    except CompilationError as exc:
        print(f"kegen lower: error: Triton could not compile kernel {args.kernel}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - any other compiler failure: a message, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(
            f"kegen lower: error: compiling kernel {args.kernel} for {args.target} failed: "
            f"{type(exc).__name__}: {first}",
            file=sys.stderr,
        )
        return 1
    data = kernel.asm[emit]
    if args.output:
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(args.output, mode) as f:
            f.write(data)
        print(
            f"wrote {emit} of {args.kernel} ({len(data)} {'bytes' if isinstance(data, bytes) else 'chars'}) "
            f"to {args.output}",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(data if isinstance(data, str) else data.decode("latin-1"))
    return 0
