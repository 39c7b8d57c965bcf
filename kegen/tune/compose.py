"""The tuned model as one candidate: each kernel group runs through its installed candidate (the
search's winner or Inductor's draft of the group), in Inductor's order; between them the wrapper does
only metadata work (binding weights, `torch.as_strided` views of the model's inputs).

Every group candidate's module-level names get the prefix `gK_` so that the groups' kernels,
helpers and block-size constants live side by side in one file.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kegen.tune.partition import Partition

HEADER = '''"""kegen tune: {model} (variant {variant}) as Inductor's kernel groups, each through its installed
candidate ({installed}); the wrapper binds weights and makes views of the inputs only."""
'''


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
    return names


class _Prefix(ast.NodeTransformer):
    def __init__(self, names: set[str], prefix: str) -> None:
        self.names = names
        self.prefix = prefix

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            node.id = self.prefix + node.id
        return node

    def _def(self, node: Any) -> Any:
        self.generic_visit(node)
        if node.name in self.names:
            node.name = self.prefix + node.name
        return node

    visit_FunctionDef = _def  # noqa: N815 - ast.NodeTransformer's naming
    visit_ClassDef = _def  # noqa: N815

    def visit_Global(self, node: ast.Global) -> ast.AST:
        node.names = [self.prefix + n if n in self.names else n for n in node.names]
        return node


def prefixed(source: str, prefix: str) -> tuple[list[str], str]:
    """(the source's import lines, its other top-level code with every module-level name prefixed)."""
    tree = ast.parse(source)
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    body = [
        n
        for n in tree.body
        if not isinstance(n, ast.Import | ast.ImportFrom)
        and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    module = ast.Module(body=body, type_ignores=[])
    _Prefix(_defined(module), prefix).visit(module)
    return imports, "\n\n\n".join(ast.unparse(n) for n in module.body)


def _v(name: str) -> str:
    return f"v_{name}"


def layout(part: Partition, cap: Any) -> dict[str, Any]:
    """What `compose` needs of a partition and its capture, as JSON data (kept in the run's state)."""
    from kegen.inductor.draft import reference_source

    out_node = next(n for n in part.graph.graph.nodes if n.op == "output")
    results = out_node.args[0]
    results = list(results) if isinstance(results, list | tuple) else [results]
    needs_reference = any(i.kind != "user" for i in cap.inputs)
    return {
        "placeholders": [n.name for n in part.graph.graph.nodes if n.op == "placeholder"],
        "inputs": [[i.kind, i.target, i.index] for i in cap.inputs],
        "forward_args": list(cap.forward_args),
        "glue": [[name, *part.views[name]] for name in part.glue],
        "groups": [
            {
                "index": g.index,
                "kernel": g.kernel,
                "name": g.name,
                "nodes": g.nodes,
                "inputs": g.inputs,
                "outputs": g.outputs,
                "flat": g.flat,
            }
            for g in part.groups
        ],
        "outputs": [r.name for r in results[: cap.user_outputs]],
        "single_output": bool(cap.single_output),
        "reference": re.sub(r"\n{3,}", "\n\n\n", reference_source(cap)) if needs_reference else "",
    }


def compose(
    lay: dict[str, Any], sources: list[str], model: str, variant: int, installed: list[bool] | None = None
) -> str:
    """One candidate running `sources[k]` (a KernelBench candidate for group k's problem) per group."""
    groups = lay["groups"]
    if len(sources) != len(groups):
        raise ValueError(f"{len(sources)} sources for {len(groups)} groups")
    installed = installed or [False] * len(sources)
    imports: list[str] = []
    bodies: list[str] = []
    for g, src in zip(groups, sources, strict=True):
        imp, body = prefixed(src, f"g{g['index']}_")
        imports += [i for i in imp if i not in imports]
        bodies.append(f"# --- group {g['index']}: {g['kernel']} ({', '.join(g['nodes'])})\n{body}")
    init = ["super().__init__()"]
    if lay["reference"]:
        init.append("self.reference = Reference(*args, **kwargs)")
    init += [f"self.g{g['index']} = g{g['index']}_ModelNew()" for g in groups]
    args = lay["forward_args"]
    fwd: list[str] = []
    for name, (kind, target, index) in zip(lay["placeholders"], lay["inputs"], strict=True):
        if kind == "user":
            fwd.append(f"{_v(name)} = {args[index]}")
        elif kind == "parameter":
            fwd.append(f"{_v(name)} = self.reference.get_parameter({target!r})")
        elif kind == "buffer":
            fwd.append(f"{_v(name)} = self.reference.get_buffer({target!r})")
        else:
            fwd.append(f"{_v(name)} = operator.attrgetter({target!r})(self.reference)")
    for name, root, size, stride, offset in lay["glue"]:
        fwd.append(f"{_v(name)} = torch.as_strided({_v(root)}, {tuple(size)}, {tuple(stride)}, {offset})")
    for g in groups:
        flat = g["flat"]
        ins = [
            f"torch.as_strided({_v(i)}, ({flat[i]},), (1,), 0)" if i in flat else _v(i) for i in g["inputs"]
        ]
        call = f"self.g{g['index']}({', '.join(ins)})"
        outs = [_v(o) for o in g["outputs"]]
        fwd.append(f"{outs[0]} = {call}" if len(outs) == 1 else f"{', '.join(outs)}, = {call}")
    outs = [_v(r) for r in lay["outputs"]]
    ret = outs[0] if lay["single_output"] and len(outs) == 1 else f"({', '.join(outs)},)"
    model_new = [
        "class ModelNew(nn.Module):",
        "    def __init__(self, *args, **kwargs):",
        *(f"        {ln}" for ln in init),
        "",
        f"    def forward(self, {', '.join(args)}):",
        *(f"        {ln}" for ln in fwd),
        f"        return {ret}",
    ]
    names = ", ".join(
        f"{g['name']}: {'winner' if i else 'Inductor'}" for g, i in zip(groups, installed, strict=True)
    )
    parts = [HEADER.format(model=model, variant=variant, installed=names)]
    base = ["import operator", "import torch", "import torch.nn as nn"]
    parts.append("\n".join(base + [i for i in imports if i not in base]))
    parts += bodies
    if lay["reference"]:
        parts.append(lay["reference"])
    parts.append("\n".join(model_new))
    return "\n\n\n".join(p.strip("\n") for p in parts) + "\n"
