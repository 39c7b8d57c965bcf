"""The Triton compiler backend of target `mtia`: stages ttir → tile → llir → rvasm → elf."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any

from triton._C.libtriton import ir
from triton.backends.compiler import BaseBackend, GPUTarget, Language

from lowering import compat
from lowering.backend.options import MtiaOptions, arch_machine, machine_digest

TARGET_BACKEND = "mtia"


@functools.cache
def _source_digest() -> str:
    """Digest of the compiler's sources, so editing the lowering invalidates Triton's cache."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for sub in ("backend", "codegen", "passes", "ir", "ttir"):
        for p in sorted((root / sub).rglob("*")):
            if p.suffix in (".py", ".lark"):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    for top in sorted(root.glob("*.py")):
        h.update(top.name.encode())
        h.update(top.read_bytes())
    return h.hexdigest()[:16]


def _min_dot_size(lhs_type: Any, rhs_type: Any) -> tuple[int, int, int]:
    """The dot-product engine takes any shape; Triton asks for the lower bounds (m, n, k)."""
    return (1, 1, 1)


def _reject_misspelt_options(opts: dict[str, Any]) -> None:
    """Reject an option that is not an MtiaOptions field but is a near miss of one (`num_stage`):
    a typo must not silently give the defaults. Options of other backends (Inductor passes its own
    set to every backend) are far from every field and stay ignored, as Triton's backends do."""
    from dataclasses import fields

    from lowering.errors import did_you_mean

    known = [f.name for f in fields(MtiaOptions)]
    for name in opts:
        if name in known:
            continue
        hint = did_you_mean(name, known, n=2, cutoff=0.85)
        if hint:
            raise ValueError(f"unknown mtia option {name!r}: {hint}valid options: {', '.join(sorted(known))}")


class MtiaBackend(BaseBackend):
    """Lowers Triton kernels to a linked RISC-V executable image for the simulated MTIA PE."""

    binary_ext = "elf"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == TARGET_BACKEND

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "elf"

    def hash(self) -> str:
        """Part of Triton's cache key: the target, its machine description's content and a digest of
        kegen's compiler sources."""
        arch = str(self.target.arch)
        return f"mtia-{arch}-{machine_digest(arch_machine(arch))}-{_source_digest()}"

    def parse_options(self, opts: dict[str, Any]) -> MtiaOptions:
        """Triton's option dict -> MtiaOptions; the target arch picks the machine description
        (`2i` -> mtia-2i, `v1` -> mtia-v1, `300` -> mtia-300, or a machine TOML path) unless
        `machine` is given. The driver's target follows KEGEN_MACHINE (lowering.backend.driver)."""
        args = dict(opts)
        _reject_misspelt_options(args)
        arch = str(self.target.arch)
        args.setdefault("arch", arch)
        if not args.get("machine"):
            args["machine"] = arch_machine(arch)
        # options some Triton releases pass to every backend and then require (lowering.compat)
        return compat.carry_runtime_options(MtiaOptions.from_dict(args), args)

    def pack_metadata(self, metadata: Any) -> tuple[Any, ...]:
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options: MtiaOptions) -> dict[str, Any]:
        return {"min_dot_size": _min_dot_size}

    def get_module_map(self) -> dict[str, ModuleType]:
        from lowering.backend import libdevice

        return {"triton.language.extra.libdevice": libdevice}

    def load_dialects(self, ctx: Any) -> None:
        return None

    @staticmethod
    def make_ttir(mod: Any, metadata: dict[str, Any], options: MtiaOptions) -> Any:
        """Triton's own TTIR clean-up passes (the same list the NVIDIA backend runs)."""
        from lowering.ttir.frontend import add_ttir_cleanup_passes

        pm = ir.pass_manager(mod.context)
        pm.enable_debug()
        add_ttir_cleanup_passes(pm)
        pm.run(mod, "make_ttir")
        return mod

    def add_stages(
        self, stages: dict[str, Any], options: MtiaOptions, language: Language = Language.TRITON
    ) -> None:
        """ttir (Triton's clean-up passes), then kegen's stages (`lowering.pipeline.make_stages`): each
        a pure function of the previous artifact, so Triton's overrides (`TRITON_KERNEL_OVERRIDE`,
        the `ir_override` option) work for every stage."""
        from lowering import pipeline

        if language != Language.TRITON:
            raise NotImplementedError("target mtia compiles Triton kernels only (not Gluon)")
        install_override_parser()
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages.update(pipeline.make_stages(options))


_TEXT_EXTS = ("tile", "rvasm")


def install_override_parser() -> None:
    """Teach Triton's override reader (`triton.compiler.compiler.parse`, which knows only NVIDIA's and
    AMD's file kinds and returns None for others) to read `.tile` and `.rvasm` files as text and
    `.elf` files as bytes, so `TRITON_KERNEL_OVERRIDE` and `ir_override` replace every mtia stage."""
    from triton.compiler import compiler as triton_compiler

    original = triton_compiler.parse
    if getattr(original, "_kegen_mtia", False):
        return

    def parse(full_name: str, ext: str, context: Any) -> Any:
        if ext in _TEXT_EXTS:
            return Path(full_name).read_text()
        if ext == "elf":
            return Path(full_name).read_bytes()
        return original(full_name, ext, context)

    parse._kegen_mtia = True  # type: ignore[attr-defined]
    triton_compiler.parse = parse
