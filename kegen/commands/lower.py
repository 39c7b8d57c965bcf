"""`kegen lower`: compile one @triton.jit kernel for mtia (kegen's backend), nvidia or amd
(Triton's own backends, no GPU needed) and print or write any stage.

For compiler research on mtia: `--print-after-all` / `--print-after PASS` dump the tile IR between
passes, `--verify-each` runs the verifier after every pass, `--pipeline` picks the passes, and
`--from STAGE` re-runs the later stages from an (edited) stage file given instead of the kernel file.
"""

from __future__ import annotations

import argparse
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
        "kernel_file",
        nargs="?",
        metavar="KERNEL.py",
        help="Python file defining the @triton.jit kernel (with --from: the stage file to start from)",
    )
    parser.add_argument(
        "--kernel", metavar="NAME", help="name of the @triton.jit function (required without --from)"
    )
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
    research = parser.add_argument_group("mtia compiler research")
    research.add_argument(
        "--from",
        dest="from_stage",
        choices=("ttir", "tile", "llir", "rvasm"),
        help="KERNEL.py is instead this stage's (edited) artifact: run only the later stages on it",
    )
    research.add_argument("--print-after-all", action="store_true", help="print the tile IR after every pass")
    research.add_argument(
        "--print-after", action="append", default=[], metavar="PASS", help="print the tile IR after PASS"
    )
    research.add_argument("--verify-each", action="store_true", help="run the IR verifier after every pass")
    research.add_argument(
        "--pipeline",
        metavar="SPEC",
        help="passes to run, e.g. 'inline-calls,pointer-analysis{block_dma=false},liveness,...' "
        "(default: lowering.pipeline.DEFAULT_PASSES; `kegen lower --list-passes` shows them)",
    )
    research.add_argument(
        "--list-passes", action="store_true", help="list the known passes and their options, then exit"
    )


def _value(text: str) -> Any:
    """A literal from the command line: true/false, an int, a float, else the string."""
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
    from kegen.modules import ModuleLoadError, load_module_from_file

    try:
        module = load_module_from_file(path, f"kegen_lower_{Path(path).stem}")
    except ModuleLoadError as exc:
        raise LowerUsageError(str(exc)) from None
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
        options = _mtia_options(args)
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
    if _research_flags(args):  # the hooks run while compiling: never answer from Triton's cache
        from triton import knobs

        with knobs.compilation.scope():
            knobs.compilation.always_compile = True
            return triton.compile(ASTSource(fn, sig, consts), target=target, options=options), emit
    return triton.compile(ASTSource(fn, sig, consts), target=target, options=options), emit


def _mtia_options(args: argparse.Namespace) -> dict[str, Any]:
    """The --option pairs, checked against the mtia options and the passes' options."""
    from dataclasses import fields

    from lowering.options import MtiaOptions
    from lowering.pipeline import UnknownOptionError, check_option_names

    options = {k: _value(v) for k, v in _pairs(args.option, "option").items()}
    try:
        check_option_names(options, [f.name for f in fields(MtiaOptions)])
    except UnknownOptionError as exc:
        raise LowerUsageError(str(exc)) from None
    return options


def _instrumentation(args: argparse.Namespace) -> Any:
    from lowering.pipeline import Instrumentation, UnknownOptionError, known_passes, parse_pipeline

    wanted = [p for item in args.print_after for p in item.split(",") if p]
    known = known_passes()
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise LowerUsageError(f"--print-after: no pass {', '.join(unknown)}; passes: {', '.join(known)}")
    if args.pipeline:
        try:
            parse_pipeline(args.pipeline)
        except UnknownOptionError as exc:
            raise LowerUsageError(f"--pipeline: {exc}") from None
    return Instrumentation(
        print_after_all=args.print_after_all,
        print_after=frozenset(wanted),
        verify_each=args.verify_each,
        pipeline=args.pipeline,
        stream=sys.stderr,
    )


def _research_flags(args: argparse.Namespace) -> bool:
    flags = (args.from_stage, args.print_after_all, args.print_after, args.verify_each, args.pipeline)
    return any(bool(f) for f in flags)


def list_passes() -> str:
    """One line per registered pass: name, kind, options (with candidates for search options)."""
    from dataclasses import fields

    from lowering.pipeline import known_passes

    lines = []
    for name, cls in known_passes().items():
        space = cls.schedule_space()
        opts = [f"{f.name}={f.default!r}" + (f" in {space[f.name]}" if f.name in space else "")
                for f in fields(cls)]
        kind = "analysis" if cls.analysis else "transform"
        lines.append(f"{name:<18} {kind:<9} {', '.join(opts) or '-'}")
    return "\n".join(lines) + "\n"


def compile_from_file(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """--from STAGE: run the stages after STAGE on the file; (artifacts by stage, stage to emit)."""
    from lowering.backend.options import MtiaOptions, default_machine
    from lowering.pipeline import STAGES, compile_from

    if args.target != "mtia":
        raise LowerUsageError("--from is for --target mtia")
    emit = args.emit or DEFAULT_EMIT["mtia"]
    later = STAGES[STAGES.index(args.from_stage) + 1 :]
    if emit not in later:
        raise LowerUsageError(f"--from {args.from_stage} produces {', '.join(later)}; --emit one of those")
    if emit in BINARY_STAGES["mtia"] and not args.output:
        raise LowerUsageError(f"--emit {emit} is binary: give -o FILE")
    path = Path(args.kernel_file)
    if not path.is_file():
        raise LowerUsageError(f"no such {args.from_stage} file: {path}")
    options = _mtia_options(args)
    options.setdefault("machine", getattr(args, "machine", None) or default_machine())
    try:
        mtia = MtiaOptions.from_dict(options)
    except (TypeError, ValueError) as exc:
        raise LowerUsageError(f"bad --option: {exc}") from None
    return compile_from(args.from_stage, path.read_text(), mtia).artifacts, emit


def run(args: argparse.Namespace) -> int:
    from triton.compiler.errors import CompilationError

    from lowering.errors import LoweringError
    from lowering.ir.verifier import VerifierError

    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    try:
        if not args.kernel_file:
            raise LowerUsageError("give the kernel file (KERNEL.py, or with --from the stage file)")
        if not args.from_stage and not args.kernel:
            raise LowerUsageError("--kernel NAME is required (unless --from STAGE starts from a stage file)")
        if _research_flags(args) and args.target != "mtia":
            raise LowerUsageError("--from, --print-after*, --verify-each, --pipeline are for --target mtia")
        from lowering.pipeline import instrument

        with instrument(_instrumentation(args)):
            if args.from_stage:
                artifacts, emit = compile_from_file(args)
            else:
                kernel, emit = compile_kernel(args)
                artifacts = kernel.asm
    except (LowerUsageError, LoweringError, VerifierError) as exc:
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
    data = artifacts[emit]
    if args.output:
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(args.output, mode) as f:
            f.write(data)
        what = args.kernel or Path(args.kernel_file).name
        unit = "bytes" if isinstance(data, bytes) else "chars"
        print(f"wrote {emit} of {what} ({len(data)} {unit}) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data if isinstance(data, str) else data.decode("latin-1"))
    return 0
