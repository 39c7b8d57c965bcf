"""A mutation: a named, described source rewrite with the bottlenecks it is meant to relieve.

`remedies` and `costs` use the remedy vocabulary of `kegen.profiling.diagnosis.REMEDIES`
(parallelism, fewer_bytes, overlap, bigger_commands, fewer_launches, cheaper_math, balance): what
the rewrite provides and what it works against (a larger block on a grid axis gives bigger
commands but fewer programs). The offline operator scores them against the measured diagnosis.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# block-size vocabulary shared by the knob and block-site rewrites
BLOCKISH = re.compile(r"(BLOCK|TILE|CHUNK|GROUP|SIZE|_M$|_N$|_K$)")
NOT_BLOCKS = {"num_warps", "num_stages", "num_ctas"}
MIN_BLOCK, MAX_BLOCK = 4, 16384


def block_values(value: int) -> list[int]:
    """Neighbouring power-of-two sizes: x2, x4, /2."""
    out = [v for v in (value * 2, value * 4, value // 2) if MIN_BLOCK <= v <= MAX_BLOCK and v != value]
    return out


class MutationError(ValueError):
    """A mutation does not apply to this source."""


@dataclass(frozen=True)
class Mutation:
    """`apply(source) -> source`; `family` groups mutations for learning which kinds pay off."""

    name: str
    family: str
    description: str
    apply: Callable[[str], str] = field(compare=False, repr=False)
    helps: tuple[str, ...] = ()  # bottleneck categories it targets: memory, compute, latency
    prior: float = 1.0
    remedies: tuple[str, ...] = ()  # remedy kinds it provides
    costs: tuple[str, ...] = ()  # remedy kinds it works against
    kernel: str = ""  # the jit kernel it changes ('' for the whole module)


class RenameNames(ast.NodeTransformer):
    """Names renamed by `env` (old -> new), loads and stores alike; other names untouched."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(self.env[node.id], node.ctx) if node.id in self.env else node


def jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module's top-level functions decorated with a `jit` (Triton kernels), in source order."""
    return [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
    ]


def model_forward(tree: ast.Module) -> ast.FunctionDef:
    """`ModelNew.forward` of a candidate module; MutationError if it has none."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    forward = next(
        (n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef) and n.name == "forward"),
        None,
    )
    if forward is None:
        raise MutationError("no ModelNew.forward")
    return forward


def launch_of(stmt: ast.AST) -> tuple[str, ast.Call] | None:
    """(kernel, call) of a statement `kernel[grid](...)`, else None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
            return f.value.id, stmt.value
    return None


def names_in(node: ast.AST) -> set[str]:
    """Every name read or written anywhere under `node`."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def reads(node: ast.AST) -> set[str]:
    """Names read under `node` (an augmented assignment reads its target too)."""
    out = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    out |= {
        n.target.id for n in ast.walk(node) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    }
    return out


def constexpr_params(fn: ast.FunctionDef) -> set[str]:
    """The kernel's parameters annotated `tl.constexpr` (positional-only ones included)."""
    args = fn.args.posonlyargs + fn.args.args
    return {a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
