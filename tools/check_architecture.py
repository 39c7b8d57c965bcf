"""The architecture rules of kegen, checked over the source with `ast` (nothing is imported).

Run `python tools/check_architecture.py` (tools/check.sh does; so does tests/test_architecture.py).
It reads every module under kegen/, lowering/, mtia_sim/ and tools/ and prints each violation as
`file:line: [rule] message`:

- size:    no module over MAX_LINES lines (tools included);
- folder:  no package folder with more than MAX_MODULES modules (`__init__.py` counted);
- layer:   the LAYERS table below (who may not import whom);
- cycle:   no import cycle between modules (the strongly connected components of the import graph).

An import counts wherever it is written in a module (a lazy import inside a function hides a cycle,
it does not remove it); only imports under `if TYPE_CHECKING:` are left out. `from p import m`
where `p.m` is a module is an edge to `p.m`; otherwise to `p`. Tools import each other as top-level
scripts (`from bench_llm_real import ...`), so there a bare name that is a tools script is `tools.X`.

ALLOWED lists violations other work is removing now; they are printed but do not fail the run.
Keep it short and empty it as they go.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kegen", "lowering", "mtia_sim", "tools")
MAX_LINES = 500
MAX_MODULES = 20


@dataclass(frozen=True)
class Layer:
    """Modules under `source` (but not under any of `except_`) import nothing under `forbidden`.

    Names are dotted prefixes (`lowering.backend` covers `lowering.backend.driver`); a prefix
    that names no module yet (a package still to be created) simply matches nothing.
    """

    name: str
    source: tuple[str, ...]
    forbidden: tuple[str, ...]
    except_: tuple[str, ...] = ()
    why: str = ""


LAYERS: tuple[Layer, ...] = (
    Layer(
        "simulator-alone",
        ("mtia_sim",),
        ("triton", "lowering", "kegen"),
        why="the simulator runs machine code; it knows no compiler and no search",
    ),
    Layer(
        "lowering-core",
        ("lowering",),
        ("kegen", "lowering.backend"),
        except_=("lowering.backend",),
        why="the compiler core takes IR and options; the backend plugs it into Triton",
    ),
    Layer(
        "lowering-core-no-triton",
        ("lowering",),
        ("triton",),
        # The Triton edge of lowering: the TTIR frontend runs Triton's own front end to get TTIR,
        # the corpus is written in Triton, the interpreter fix patches Triton's interpreter.
        except_=(
            "lowering.backend",
            "lowering.ttir.frontend",
            "lowering.corpus",
            "lowering.triton_interpreter",
        ),
        why="only lowering/backend and the Triton edge (ttir.frontend, corpus) import Triton",
    ),
    Layer(
        "lowering-not-kegen",
        ("lowering.backend",),
        ("kegen",),
        why="the Triton backend is installed without kegen",
    ),
    Layer(
        "sandbox-not-trusted",
        ("kegen.eval.sandboxed",),
        ("kegen.eval.trusted",),
        why="code that runs beside a candidate cannot reach the trusted side's verdicts",
    ),
    Layer(
        "executor-not-search",
        ("kegen.executor",),
        ("kegen.search",),
        why="the executor runs the callables it is handed",
    ),
    Layer(
        "tools-on-top",
        ("kegen", "lowering", "mtia_sim"),
        ("tools",),
        why="tools are scripts over the packages, never a dependency of them",
    ),
)

# (rule, subject) pairs printed but not failing: rule is "size", "folder", "layer:<name>" or
# "cycle"; subject is a module (size, layer), a folder (folder) or a cycle's first module in
# sorted order (cycle). A prefix ending in "." matches every subject under it.
ALLOWED: tuple[tuple[str, str], ...] = ()  # empty: every rule holds (issue 28)


@dataclass(frozen=True)
class Import:
    target: str  # dotted name as resolved (internal module, or an external name)
    line: int


@dataclass
class Module:
    name: str
    where: str  # the file, relative to the checked root
    lines: int
    imports: list[Import] = field(default_factory=list)
    package: bool = False  # an __init__.py


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str
    where: str  # the file, relative to the checked root
    line: int
    message: str

    def allowed(self, allowed: Iterable[tuple[str, str]] = ALLOWED) -> bool:
        """Whether ALLOWED lists it (by rule and subject, or a subject prefix ending in ".")."""
        return any(
            rule == self.rule
            and (self.subject == subj or (subj.endswith(".") and self.subject.startswith(subj)))
            for rule, subj in allowed
        )

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: [{self.rule}] {self.message}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except the body of `if TYPE_CHECKING:`."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _base(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    prefix = ".".join(parts[: max(keep, 0)])
    return f"{prefix}.{node.module}" if node.module else prefix


def parse(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Module]:
    """Every module under the packages, with its imports resolved to dotted names."""
    modules: dict[str, Module] = {}
    sources: dict[str, tuple[ast.AST, bool]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:  # moved away while we walk (someone is editing the tree)
                continue
            name = module_name(path, root)
            where = path.relative_to(root).as_posix()
            modules[name] = Module(name, where, len(text.splitlines()), package=path.name == "__init__.py")
            sources[name] = (ast.parse(text, filename=str(path)), path.name == "__init__.py")
    scripts = {name.split(".", 1)[1] for name in modules if name.startswith("tools.")}
    for name, (tree, is_package) in sources.items():
        mod = modules[name]
        for node in _import_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _base(node, name, is_package)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if name.startswith("tools.") and target.split(".")[0] in scripts:
                    target = f"tools.{target}"
                imp = Import(_resolve(target, modules), node.lineno)
                if imp not in mod.imports:
                    mod.imports.append(imp)
        mod.imports.sort(key=lambda i: (i.line, i.target))
    return modules


def _resolve(target: str, modules: dict[str, Module]) -> str:
    """The longest known module that `target` names (an internal `a.b.C` is module `a.b`)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return target


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def check_sizes(modules: dict[str, Module]) -> list[Violation]:
    return [
        Violation("size", m.name, m.where, 1, f"{m.lines} lines (budget {MAX_LINES})")
        for m in modules.values()
        if m.lines > MAX_LINES
    ]


def check_folders(modules: dict[str, Module]) -> list[Violation]:
    folders: dict[str, list[Module]] = {}
    for m in modules.values():
        folders.setdefault(m.where.rpartition("/")[0], []).append(m)
    out = []
    for folder, members in sorted(folders.items()):
        init = next((m for m in members if m.package), None)
        if init is not None and len(members) > MAX_MODULES:
            message = f"{len(members)} modules in {folder}/ (at most {MAX_MODULES})"
            out.append(Violation("folder", init.name, init.where, 1, message))
    return out


def check_layers(modules: dict[str, Module], layers: Iterable[Layer] = LAYERS) -> list[Violation]:
    out = []
    for layer in layers:
        for m in modules.values():
            if not _under(m.name, layer.source) or _under(m.name, layer.except_):
                continue
            for imp in m.imports:
                if _under(imp.target, layer.forbidden):
                    out.append(
                        Violation(
                            f"layer:{layer.name}",
                            m.name,
                            m.where,
                            imp.line,
                            f"{m.name} imports {imp.target} ({layer.why})",
                        )
                    )
    return out


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a module importing itself)."""
    graph = {
        name: sorted({i.target for i in m.imports if i.target in modules}) for name, m in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # iterative Tarjan: frames of (node, iterator over its successors)
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(graph[start])))
        while work:
            node, succ = work[-1]
            advanced = False
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    found.append(sorted(comp))
    return sorted(found)


def check_cycles(modules: dict[str, Module]) -> list[Violation]:
    out = []
    for comp in cycles(modules):
        members = set(comp)
        first = modules[comp[0]]
        edges = [
            f"{modules[a].where}:{imp.line} {a} -> {imp.target}"
            for a in comp
            for imp in modules[a].imports
            if imp.target in members
        ]
        message = f"import cycle of {len(comp)} modules: {', '.join(comp)}\n    " + "\n    ".join(edges)
        line = next((i.line for i in first.imports if i.target in members), 1)
        out.append(Violation("cycle", comp[0], first.where, line, message))
    return out


def check(
    root: Path = ROOT, packages: Iterable[str] = PACKAGES, layers: Iterable[Layer] = LAYERS
) -> list[Violation]:
    """Every violation of the rules under `root`, in a stable order."""
    modules = parse(root, packages)
    return (
        check_sizes(modules) + check_folders(modules) + check_layers(modules, layers) + check_cycles(modules)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="fail on ALLOWED violations too")
    args = parser.parse_args(argv)
    violations = check()
    failing = [v for v in violations if args.strict or not v.allowed()]
    for v in violations:
        print(("" if v in failing else "allowed (being fixed): ") + str(v))
    n_allowed = len(violations) - len(failing)
    print(f"{len(failing)} violation(s), {n_allowed} allowed", file=sys.stderr)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
