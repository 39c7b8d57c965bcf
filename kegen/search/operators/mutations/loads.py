"""Reuse of repeated loads in a kernel's straight-line code (value numbering on the AST).

A later `tl.load(...)` equal to an earlier one (pointer, mask, `other=`, every argument; positional
arguments named; a name counts as the value it holds, so `mask=m` after `m = start + offs < n`
equals `mask=start + offs < n`) becomes the earlier value when, between the two, no store, atomic or
call that may write memory ran and none of the names it reads was reassigned to another value. The
same holds for any expression built on a reused load (`tl.load(p).to(tl.float32)`), and an
assignment that gives a name the value it already holds (`mask = start + offs < n` again, nothing it
reads changed) is dropped. When the earlier load is not bound to a name that still holds it, it is
bound to a fresh one (`row_tileK`) first.

Only the kernel's top-level statements are rewritten; a compound statement (a loop, an `if`) is
opaque: nothing inside it is reused or replaced, and every name it assigns and any write it may make
end what was known before it. In a `@triton.jit` kernel tensors are values (`acc += x` rebinds
`acc`), so two names holding one value never alias a mutable object.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field

_WRITES = {
    "store",
    "device_print",
    "device_assert",
    "debug_barrier",
    "static_print",
    "static_assert",
    "inline_asm_elementwise",
}
_PURE_BUILTINS = {"min", "max", "float", "int", "abs", "len", "bool"}

Key = int  # a value number


def _is_load(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load"


def _writes(n: ast.AST) -> bool:
    """Whether the call `n` may write memory or have another side effect."""
    if not isinstance(n, ast.Call):
        return False
    if isinstance(n.func, ast.Attribute):
        return n.func.attr in _WRITES or n.func.attr.startswith("atomic_")
    return not (isinstance(n.func, ast.Name) and n.func.id in _PURE_BUILTINS)


def _volatile(n: ast.AST) -> bool:
    """A load that must not be merged: `volatile=`, or arguments it cannot name (`*a`, `**kw`)."""
    if not (_is_load(n) and isinstance(n, ast.Call)):
        return False
    if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
        return True
    return any(
        k.arg == "volatile" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
        for k in n.keywords
    )


def _pure(e: ast.AST) -> bool:
    """No call in `e` writes, no load is volatile, and no scope (lambda, comprehension) opens."""
    for n in ast.walk(e):
        if _writes(n) or _volatile(n):
            return False
        if isinstance(n, ast.Lambda | ast.comprehension | ast.NamedExpr | ast.Await | ast.Yield):
            return False
    return True


def _stored(s: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)}


def _inner_writes(s: ast.stmt) -> bool:
    """Whether `s` writes anywhere but in its outermost call (`tl.store(p, tl.load(q))` reads first)."""
    top = s.value if isinstance(s, ast.Expr) else None
    return any(_writes(n) for n in ast.walk(s) if n is not top)


_LOAD_ARGS = ("pointer", "mask", "other", "boundary_check", "padding_option", "cache_modifier")


@dataclass
class _State:
    """What is known at one point of the straight-line code: each name's version (bumped on every
    assignment), the value number of each name bound to a pure value, which name holds which value,
    and the memory epoch (bumped by every statement that may write memory)."""

    versions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    values: dict[str, Key] = field(default_factory=dict)  # name -> value number of what it holds
    epoch: int = 0
    avail: dict[Key, tuple[str, int]] = field(default_factory=dict)  # value -> (name, its version)
    numbers: dict[tuple[object, ...], Key] = field(default_factory=dict)

    def _number(self, parts: tuple[object, ...]) -> Key:
        return self.numbers.setdefault(parts, len(self.numbers))

    def key(self, e: ast.AST) -> Key:
        """The value number of `e`: equal numbers, equal values. Its structure with every name
        replaced by the value it holds (`mask = start + offs < n` makes `mask=mask` and
        `mask=start + offs < n` one value), every load tagged with the memory epoch and its
        positional arguments named."""
        if isinstance(e, ast.Name):
            if e.id in self.values:
                return self.values[e.id]
            return self._number(("var", e.id, self.versions[e.id]))
        if isinstance(e, ast.Constant):
            return self._number(("const", type(e.value).__name__, repr(e.value)))
        if isinstance(e, ast.Call) and _is_load(e):
            named = dict(zip(_LOAD_ARGS, e.args, strict=False))
            named.update({k.arg: k.value for k in e.keywords if k.arg is not None})
            args = tuple(sorted((k, self.key(v)) for k, v in named.items()))
            return self._number(("load", self.epoch, self.key(e.func), args))
        parts: list[object] = [type(e).__name__]
        for name, value in ast.iter_fields(e):
            if name == "ctx":
                continue
            if isinstance(value, ast.AST):
                parts.append(self.key(value))
            elif isinstance(value, list):
                parts.append(tuple(self.key(v) if isinstance(v, ast.AST) else v for v in value))
            else:
                parts.append(value)
        return self._number(tuple(parts))

    def holder(self, e: ast.expr) -> str | None:
        """A name that holds the value of `e` now, if any."""
        got = self.avail.get(self.key(e))
        return got[0] if got is not None and self.versions[got[0]] == got[1] else None

    def assigned(self, names: set[str]) -> None:
        """`names` were given values not known here."""
        for n in names:
            self.versions[n] += 1
            self.values.pop(n, None)

    def bind(self, name: str, value: Key) -> None:
        """`name` now holds the value `value`."""
        self.values[name] = value
        self.avail[value] = (name, self.versions[name])


class _Replace(ast.NodeTransformer):
    """Bottom-up: a pure expression reading memory (or built on a replaced one) whose value a name
    holds becomes that name."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def visit(self, node: ast.AST) -> ast.AST:
        if not isinstance(node, ast.expr) or isinstance(node, ast.Name | ast.Constant):
            return super().visit(node)
        before = ast.dump(node)
        reads = any(_is_load(n) for n in ast.walk(node))
        node = self.generic_visit(node)
        changed = ast.dump(node) != before
        if (reads or changed) and isinstance(node, ast.expr) and _pure(node):
            name = self.state.holder(node)
            if name is not None:
                return ast.copy_location(ast.Name(name, ast.Load()), node)
        return node


def _values(s: ast.stmt) -> list[ast.expr]:
    """The expressions `s` evaluates before it binds anything (its replaceable parts)."""
    if isinstance(s, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return | ast.Expr):
        return [s.value] if s.value is not None else []
    return []


def _pass(stmts: list[ast.stmt]) -> tuple[list[ast.stmt], dict[Key, list[tuple[int, ast.Call]]]]:
    """One value-numbering pass: the new statements and the loads left in them (key -> every
    (statement index, call) that reads that value)."""
    st = _State()
    out: list[ast.stmt] = []
    left: dict[Key, list[tuple[int, ast.Call]]] = defaultdict(list)
    for s in stmts:
        simple = bool(_values(s)) and not _inner_writes(s)
        if simple:
            s.value = _Replace(st).visit(s.value)  # type: ignore[attr-defined]
        bound, value = _binding(s)
        if bound is not None and value is not None:
            if isinstance(value, ast.Name) and value.id == bound:
                continue  # `x = x` once the value was found in x
            if st.holder(value) == bound:
                continue  # `name = value` again while name still holds value
        if simple:
            for e in _values(s):
                for n in ast.walk(e):
                    if isinstance(n, ast.Call) and _is_load(n) and _pure(n):
                        left[st.key(n)].append((len(out), n))
        out.append(s)
        vn = st.key(value) if bound is not None and value is not None else None
        if any(_writes(n) for n in ast.walk(s)):
            st.epoch += 1
        st.assigned(_stored(s))
        if bound is not None and vn is not None:
            st.bind(bound, vn)
    return out, left


def _binding(s: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """(name, value) of `name = value` when value is pure, else (None, None)."""
    target: ast.expr | None = None
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        target = s.targets[0]
    elif isinstance(s, ast.AnnAssign) and s.value is not None:
        target = s.target
    if not isinstance(target, ast.Name) or not isinstance(s, ast.Assign | ast.AnnAssign) or s.value is None:
        return None, None
    return (target.id, s.value) if _pure(s.value) else (None, None)


def _count_loads(stmts: list[ast.stmt]) -> int:
    return sum(1 for s in stmts for n in ast.walk(s) if _is_load(n))


def reuse_loads(fn: ast.FunctionDef, taken: set[str]) -> int:
    """Rewrite `fn`'s top-level statements in place so repeated loads are read once; returns how many
    loads fewer it has. `taken`: names a fresh name must avoid (the fresh ones are added)."""
    before = _count_loads(fn.body)
    body, left = _pass(fn.body)
    hoist = [occ for occ in left.values() if len(occ) > 1]
    if hoist:
        inserts: dict[int, list[ast.stmt]] = defaultdict(list)
        for occ in hoist:
            idx, call = occ[0]
            name = _fresh(taken)
            inserts[idx].append(ast.Assign(targets=[ast.Name(name, ast.Store())], value=_copy(call)))
            _swap(body[idx], call, ast.Name(name, ast.Load()))
        bound: list[ast.stmt] = []
        for i, s in enumerate(body):
            bound.extend(inserts.get(i, []))
            bound.append(s)
        body, _ = _pass(bound)
    fn.body = body
    return before - _count_loads(fn.body)


def _fresh(taken: set[str]) -> str:
    n = 0
    while f"row_tile{n}" in taken:
        n += 1
    taken.add(f"row_tile{n}")
    return f"row_tile{n}"


def _copy(e: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(e), mode="eval").body


def _swap(s: ast.stmt, old: ast.AST, new: ast.expr) -> None:
    """Replace the node `old` (by identity) inside statement `s` with `new`."""

    class _Swap(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> ast.AST:
            return new if node is old else super().visit(node)

    _Swap().visit(s)
