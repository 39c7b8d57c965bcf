"""Prompts from template files (kegen/prompts/*.tmpl, system.md) filled from an `OperatorContext`."""

from __future__ import annotations

from importlib import resources
from string import Template

from kegen.search.operators.context import OperatorContext

TEMPLATES = {"draft": "draft.tmpl", "optimize": "optimize.tmpl", "debug": "debug.tmpl"}


def read_template(name: str) -> str:
    """The text of a template file shipped in `kegen/prompts`."""
    path = resources.files("kegen.prompts").joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} is missing from kegen/prompts; reinstall kegen")
    return path.read_text(encoding="utf-8")


def render_prompt(ctx: OperatorContext) -> tuple[str, str, str]:
    """(template name, system message, user message) for this step."""
    name = TEMPLATES.get(ctx.phase, "optimize.tmpl")
    attempts = (
        "\n".join(
            f"- node {a.node_id} ({a.relation}): {a.description or 'seed'} -> "
            f"{a.verdict or 'pending'}, {a.fitness:.3f}x"
            for a in ctx.attempts
        )
        or "- nothing yet"
    )
    knowledge = "\n\n".join(f"### {title}\n{text}" for title, text in ctx.knowledge) or "(none selected)"
    fields = {
        "target": ctx.problem.target,
        "machine": ctx.problem.machine,
        "problem_source": ctx.problem.source.strip(),
        "op_summary": f"\nRecognised ops: {ctx.problem.op_summary}\n" if ctx.problem.op_summary else "",
        "parent_id": str(ctx.parent.id),
        "parent_fitness": f"{ctx.parent.fitness:.3f}",
        "parent_code": ctx.parent_code.strip() or "# (no code yet)",
        "diagnosis": ctx.diagnosis.text(),
        "failure": ctx.failure or "(none)",
        "attempts": attempts,
        "knowledge": knowledge,
        "constraints": "\n".join(f"- {c}" for c in ctx.constraints),
    }
    user = Template(read_template(name)).safe_substitute(fields)
    return name, read_template("system.md"), user
