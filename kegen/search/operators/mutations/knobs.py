"""Tunable values in a candidate's source, found and rewritten on its AST.

Block knobs: module constants (`BLOCK_SIZE = 128`), integer keywords of launches
(`kernel[grid](..., BLOCK=64)`; the same literal inside that launch's grid is rewritten too) and
integer defaults of `tl.constexpr` parameters. Launch-option knobs: the mtia backend's performance
options (`lowering.pipeline.search_space()`: ints, strings, booleans) passed as launch keywords of the
module's jit kernels; an absent keyword stands for the backend's default.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kegen.search.operators.mutations.base import (
    BLOCKISH,
    NOT_BLOCKS,
    Mutation,
    MutationError,
    block_values,
    jit_functions,
)
from kegen.search.operators.mutations.blocks import launch_fits
from kegen.search.operators.mutations.launches import (
    launch_name,
    launch_options_of,
    launches,
    option_defaults,
    option_space,
)

OPTION_HELPS: dict[str, tuple[str, ...]] = {
    "num_stages": ("memory",),
    "pe_mapping": ("memory", "latency"),
    "dual_core": ("latency", "compute"),
    "red_accumulate": ("memory", "latency"),
}
# the remedy kind (kegen.profiling.diagnosis.REMEDIES) each launch option serves, and the value that
# serves it ("up": a larger number; None: any change, direction unknown). Moving towards that value
# provides the remedy; moving away works against it. An option not listed is neutral.
OPTION_REMEDIES: dict[str, tuple[str, Any]] = {
    "num_stages": ("overlap", "up"),  # multi-buffering: the next tile loads while this one computes
    "dual_core": ("overlap", True),  # two programs per PE at once (no help when programs <= PEs)
    "red_accumulate": ("fewer_bytes", True),  # cross-PE accumulation in the reduction engine
    "sram_mode": ("fewer_bytes", "resident"),  # DRAM tensors served from the on-chip SRAM
    "pe_mapping": ("balance", None),
}


@dataclass(frozen=True)
class Knob:
    """One tunable value: `where` is const | launch | default; `index` numbers launches of a kernel;
    `option` marks a backend launch option (any type) as opposed to an integer block size."""

    where: str
    kernel: str
    name: str
    value: Any
    index: int = 0
    option: bool = False

    @property
    def key(self) -> str:
        return f"{self.where}:{self.kernel}:{self.index}:{self.name}"

    @property
    def is_block(self) -> bool:
        return not self.option


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same type (True == 1 in Python, but not as an option value)."""
    return type(a) is type(b) and a == b


def _is_int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def find_knobs(source: str, *, launch_options: bool = True) -> list[Knob]:
    """Every tunable value of the source, in source order."""
    tree = ast.parse(source)
    knobs: list[Knob] = []
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id.isupper()
            and BLOCKISH.search(stmt.targets[0].id)
            and _is_int(stmt.value)
        ):
            knobs.append(Knob("const", "", stmt.targets[0].id, stmt.value.value))  # type: ignore[attr-defined]
    for fn in jit_functions(tree):
        args = fn.args.args
        defaults = dict(
            zip([a.arg for a in args[len(args) - len(fn.args.defaults) :]], fn.args.defaults, strict=True)
        )
        for a in args:
            if (
                a.annotation is not None
                and "constexpr" in ast.unparse(a.annotation)
                and _is_int(defaults.get(a.arg))
            ):
                knobs.append(Knob("default", fn.name, a.arg, defaults[a.arg].value))  # type: ignore[attr-defined]
    space = option_space() if launch_options else {}
    defaults = option_defaults() if launch_options else {}
    kernels = {fn.name for fn in jit_functions(tree)}
    for name, idx, call in launches(tree):
        present = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        for kw_name, val in present.items():
            if kw_name not in NOT_BLOCKS and kw_name not in space and _is_int(val) and kw_name.isupper():
                knobs.append(Knob("launch", name, kw_name, val.value))  # type: ignore[attr-defined]
        if name not in kernels:
            continue  # options go to the module's own kernels only (not e.g. `self.layers[i](x)`)
        for opt in space:
            given = present.get(opt)
            if given is None:
                knobs.append(Knob("launch", name, opt, defaults.get(opt, space[opt][0]), idx, option=True))
            elif isinstance(given, ast.Constant):
                knobs.append(Knob("launch", name, opt, given.value, idx, option=True))
    return knobs


class _Setter(ast.NodeTransformer):
    def __init__(self, knob: Knob, value: Any) -> None:
        self.knob, self.value, self.hit = knob, value, False
        self._counts: dict[str, int] = {}

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        k = self.knob
        if (
            k.where == "const"
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == k.name
            and isinstance(node.value, ast.Constant)
        ):
            node.value = ast.Constant(self.value)
            self.hit = True
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        k = self.knob
        if k.where == "default" and node.name == k.kernel:
            args = node.args.args
            names = [a.arg for a in args[len(args) - len(node.args.defaults) :]]
            if k.name in names:
                node.args.defaults[names.index(k.name)] = ast.Constant(self.value)
                self.hit = True
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        k = self.knob
        name = launch_name(node)
        if k.where != "launch" or name is None:
            return node
        idx = self._counts.get(name, 0)
        self._counts[name] = idx + 1
        if name != k.kernel or (k.option and idx != k.index):
            return node
        for kw in node.keywords:
            if kw.arg == k.name:
                old = kw.value.value if isinstance(kw.value, ast.Constant) else None
                kw.value = ast.Constant(self.value)
                self.hit = True
                if k.is_block and isinstance(old, int) and isinstance(node.func, ast.Subscript):
                    same = [
                        n for n in ast.walk(node.func.slice) if isinstance(n, ast.Constant) and n.value == old
                    ]
                    if len(same) > 1:  # `(cdiv(M, 32), cdiv(N, 32))`: which axis is this block's?
                        raise MutationError(
                            f"the grid of {name} has {old} more than once; {k.name} cannot be followed there"
                        )
                    node.func.slice = _ReplaceInt(old, self.value).visit(node.func.slice)
                return node
        if k.option:
            node.keywords.append(ast.keyword(arg=k.name, value=ast.Constant(self.value)))
            self.hit = True
        return node


class _ReplaceInt(ast.NodeTransformer):
    def __init__(self, old: int, new: int) -> None:
        self.old, self.new = old, new

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(self.new) if type(node.value) is int and node.value == self.old else node


def set_knob(source: str, knob: Knob, value: Any) -> str:
    """The source with `knob` set to `value` (launch options are added when absent)."""
    tree = ast.parse(source)
    setter = _Setter(knob, value)
    tree = setter.visit(tree)
    if not setter.hit:
        raise MutationError(f"knob {knob.key} not found in the source")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def knob_mutations(source: str, *, launch_options: bool = True) -> list[Mutation]:
    """Every single-knob change of the source."""
    muts: list[Mutation] = []
    space = option_space() if launch_options else {}
    seen: set[str] = set()
    pipelined = kernels_with_load_loops(source)
    for knob in find_knobs(source, launch_options=launch_options):
        if knob.name == "num_stages" and knob.kernel not in pipelined:
            continue  # multi-buffering only changes loops that load
        if knob.is_block:
            if type(knob.value) is not int or knob.key in seen:
                continue
            seen.add(knob.key)
            for v in block_values(knob.value):
                up = v > knob.value
                muts.append(
                    Mutation(
                        name=f"{knob.name}={v}@{knob.kernel or 'module'}",
                        family="block_up" if up else "block_down",
                        description=f"set {knob.name} {knob.value} -> {v}"
                        + (f" in {knob.kernel}" if knob.kernel else ""),
                        apply=_setter(knob, v),
                        helps=("memory", "latency") if up else ("compute",),
                        prior=1.2 if up else 0.6,
                        remedies=("bigger_commands",) if up else (),
                        costs=() if up else ("bigger_commands",),
                        kernel=knob.kernel or "",
                    )
                )
        else:
            for v in space.get(knob.name, ()):
                if _same(v, knob.value) or not _option_fits(source, knob, v):
                    continue
                muts.append(
                    Mutation(
                        name=f"{knob.name}={v}@{knob.kernel}#{knob.index}",
                        family=knob.name,
                        description=f"launch {knob.kernel} with {knob.name}={v!r} (was {knob.value!r})",
                        apply=_setter(knob, v),
                        helps=OPTION_HELPS.get(knob.name, ()),
                        prior=1.0,
                        **_option_effects(knob.name, v, knob.value),
                        kernel=knob.kernel or "",
                    )
                )
    return muts


def _option_fits(source: str, knob: Knob, value: Any) -> bool:
    """More operand buffers (`num_stages`) or half the local store (`dual_core`) must still hold a dot
    kernel's tiles (`blocks.launch_fits`); other options always fit."""
    if knob.name not in ("num_stages", "dual_core"):
        return True
    opts = launch_options_of(source).get(knob.kernel, {})
    stages = value if knob.name == "num_stages" else opts.get("num_stages", 1)
    dual = value if knob.name == "dual_core" else opts.get("dual_core", False)
    return launch_fits(source, knob.kernel, int(stages or 1), bool(dual))


def _option_effects(name: str, value: Any, current: Any) -> dict[str, tuple[str, ...]]:
    """Remedies and costs of changing launch option `name` from `current` to `value`."""
    if name not in OPTION_REMEDIES:
        return {"remedies": (), "costs": ()}
    kind, good = OPTION_REMEDIES[name]
    if good is None:
        towards = True
    elif good == "up":
        towards = isinstance(value, int) and isinstance(current, int) and value > current
    else:
        towards = _same(value, good)
    return {"remedies": (kind,), "costs": ()} if towards else {"remedies": (), "costs": (kind,)}


def kernels_with_load_loops(source: str) -> set[str]:
    """Names of the jit kernels that have a loop with a `tl.load` in it."""
    out = set()
    for fn in jit_functions(ast.parse(source)):
        for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For | ast.While)):
            if any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "load"
                for c in ast.walk(loop)
            ):
                out.add(fn.name)
                break
    return out


def _setter(knob: Knob, value: Any):  # type: ignore[no-untyped-def]
    return lambda src: set_knob(src, knob, value)


def apply_launch_options(source: str, options: dict[str, dict[str, Any]]) -> str:
    """Set the given launch options on the kernels' launches."""
    for kernel, opts in options.items():
        for opt, val in opts.items():
            knobs = [
                k for k in find_knobs(source) if k.where == "launch" and k.kernel == kernel and k.name == opt
            ]
            for k in knobs:
                source = set_knob(source, k, val)
    return source
