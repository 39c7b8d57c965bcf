"""Snapshot (and compare) every stage artifact of every corpus kernel compiled for target mtia.

    .venv/bin/python tools/snapshot_lowering.py write DIR [--kernels a,b]
    .venv/bin/python tools/snapshot_lowering.py compare DIR [--kernels a,b] [--stages llir,rvasm]

`write` compiles each corpus kernel with `triton.compile(ASTSource(...), target=mtia)` (the path
`kernel[grid]` takes) and saves `DIR/<kernel>.<stage>` for every stage plus `DIR/manifest.json` (sha256
of each artifact). `compare` recompiles and reports which artifacts differ from the saved ones; identical
`llir`/`rvasm` for every kernel is the timing-independent proof that a refactor of the lowering left
behaviour unchanged. Pseudo-stages: `llvm` is the llir without its leading `;` comment lines, `image`
is what the simulator runs from the `elf` artifact (linked blob, entry, symbols: the container may be
an object or an executable).
Triton's cache is bypassed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def linked_image(elf: bytes, entry: str) -> bytes:
    """What the simulator runs: the linked blob, its entry and its symbols (ELF object or executable)."""
    from mtia_sim.loader import link

    image = link([elf], entry)
    symbols = ",".join(f"{k}={v}" for k, v in sorted(image.symbols.items()))
    return image.blob + f"|{image.base}|{image.entry}|{symbols}".encode()


def _strip_comments(llir: str) -> str:
    """LLVM IR without its leading `;` comment lines (the local-store layout the llir stage prints)."""
    lines = llir.splitlines(keepends=True)
    while lines and lines[0].startswith(";") and not lines[0].startswith("; ModuleID"):
        lines.pop(0)
    return "".join(lines)


def compile_corpus(names: list[str]) -> dict[str, dict[str, str | bytes]]:
    """kernel name -> stage -> artifact (or {'error': message})."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from lowering.corpus import CORPUS

    out: dict[str, dict[str, str | bytes]] = {}
    knobs.compilation.always_compile = True
    for name in names:
        entry = CORPUS[name]
        sig = {n: ("constexpr" if n in entry.constexprs else entry.signature[n]) for n in entry.fn.arg_names}
        attrs = {(entry.fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in entry.divisible_by_16}
        try:
            kernel = triton.compile(
                ASTSource(entry.fn, sig, dict(entry.constexprs), attrs or None),
                target=GPUTarget("mtia", "2i", 1),
            )
        except Exception as exc:  # noqa: BLE001 - an expected failure is part of the snapshot
            out[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
            continue
        arts: dict[str, str | bytes] = dict(kernel.asm)
        if isinstance(arts.get("elf"), bytes):
            arts["image"] = linked_image(arts["elf"], kernel.metadata.name)  # type: ignore[arg-type]
        if isinstance(arts.get("llir"), str):
            arts["llvm"] = _strip_comments(arts["llir"])  # type: ignore[arg-type]
        out[name] = arts
    return out


def _digest(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _derive(root: Path, name: str, saved: dict[str, str]) -> None:
    """Add the `image` and `llvm` pseudo-stages to a snapshot written before they existed."""
    elf, llir, asm = root / f"{name}.elf", root / f"{name}.llir", root / f"{name}.rvasm"
    if "image" not in saved and elf.is_file() and asm.is_file():
        entry = next(ln.split()[1] for ln in asm.read_text().splitlines() if ln.strip().startswith(".globl"))
        saved["image"] = _digest(linked_image(elf.read_bytes(), entry))
    if "llvm" not in saved and llir.is_file():
        saved["llvm"] = _digest(_strip_comments(llir.read_text()))


def write(root: Path, names: list[str]) -> int:
    root.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, str]] = {}
    for name, arts in compile_corpus(names).items():
        manifest[name] = {}
        for stage, data in arts.items():
            manifest[name][stage] = data if stage == "error" else _digest(data)  # type: ignore[assignment]
            mode = "wb" if isinstance(data, bytes) else "w"
            with open(root / f"{name}.{stage}", mode) as f:
                f.write(data)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} kernels to {root}")
    return 0


def compare(root: Path, names: list[str], stages: list[str]) -> int:
    saved: dict[str, dict[str, str]] = json.loads((root / "manifest.json").read_text())
    names = [n for n in names if n in saved]
    diffs: list[str] = []
    now = compile_corpus(names)
    for name in names:
        _derive(root, name, saved[name])
        for stage in stages:
            old, new = saved[name].get(stage), now[name].get(stage)
            new_h = None if new is None else (new if stage == "error" else _digest(new))
            if old != new_h:
                diffs.append(f"{name}.{stage}")
    report: dict[str, Any] = {"kernels": len(names), "stages": stages, "differ": diffs}
    print(json.dumps(report, indent=1))
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("write", "compare"))
    ap.add_argument("dir", type=Path)
    ap.add_argument("--kernels", default="", help="comma-separated corpus names (default: all)")
    ap.add_argument("--stages", default="ttir,llvm,rvasm,image,error", help="stages compared")
    args = ap.parse_args(argv)
    from lowering.corpus import CORPUS

    names = [n for n in args.kernels.split(",") if n] or list(CORPUS)
    if args.mode == "write":
        return write(args.dir, names)
    return compare(args.dir, names, [s for s in args.stages.split(",") if s])


if __name__ == "__main__":
    sys.exit(main())
