"""Prompts from template files (kegen/prompts/*.tmpl, system.md) filled from an `OperatorContext`.

Every phase carries the profile it needs, rendered by `kegen.profiling.render.prompt` from the
measured profile: optimise prompts the parent's profile and its change from the grandparent;
repair prompts the failure and the last correct ancestor's profile; draft prompts the reference's
roofline with the problem's shapes, bytes and FLOPs, and the starting point's profile. The whole
prompt fits a token budget (`kegen.search.operators.budget`): knowledge shrinks first, then the
attempts, then the profile. The hardware notes take at most `KNOWLEDGE_SHARE` of the budget (the
documents chosen for the measured bottleneck come first; an agent reads more through its
`search_knowledge` tool).

The draft template ("write a first candidate") is used only when there is no correct starting point:
in the draft phase a correct parent (a `--seed`, or kegen's own draft) gets the optimize template, so
even a small model is asked for edits of working code.
"""

from __future__ import annotations

import ast
from importlib import resources
from string import Template

from kegen.profiling.render import PROMPT_DETAIL_MAX, reference_section
from kegen.profiling.render import prompt as profile_prompt
from kegen.search.operators.budget import (
    DEFAULT_PROMPT_TOKENS,
    Fitted,
    Section,
    dropping,
    estimate_tokens,
    fit,
)
from kegen.search.operators.context import Attempt, OperatorContext

TEMPLATES = {"draft": "draft.tmpl", "optimize": "optimize.tmpl", "debug": "debug.tmpl"}
PRIORITY = {"failure": 0, "profile": 1, "attempts": 2, "knowledge": 3}
KNOWLEDGE_SHARE = 0.25  # of the prompt's token budget, at most
NO_PROFILE = "(no profile: the candidate was not measured)"


def read_template(name: str) -> str:
    """The text of a template file shipped in `kegen/prompts`."""
    path = resources.files("kegen.prompts").joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} is missing from kegen/prompts; reinstall kegen")
    return path.read_text(encoding="utf-8")


def attempt_line(a: Attempt) -> str:
    """One earlier attempt: what it changed, its verdict and speedup, its error or its effect."""
    line = f"- node {a.node_id} ({a.relation}): {a.description or 'seed'} -> {a.verdict or 'pending'}"
    line += f", {a.fitness:.3f}x" if a.verdict == "ok" or a.fitness else ""
    if a.error:
        first = a.error.strip().splitlines()
        line += f"; error: {first[0][:300] if first else ''}"
    elif a.effect:
        line += f"; {a.effect}"
    return line


def problem_shapes(source: str) -> str:
    """The problem's size constants and input constructors, read from its source (no import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    parts = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, int | float) and not isinstance(node.value.value, bool):
                parts.append(ast.unparse(node).replace(" ", ""))
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            calls = [
                ast.unparse(c)
                for c in ast.walk(node)
                if isinstance(c, ast.Call) and ast.unparse(c.func).startswith("torch.")
            ]
            parts.append("get_inputs: " + ", ".join(calls[:6]))
    return "; ".join(parts)


def _profile_variants(ctx: OperatorContext) -> list[str]:
    if ctx.phase == "debug":
        prof, parent = ctx.grandparent_profile, None
        if prof is None:
            return [NO_PROFILE]
        head = "Last correct ancestor (the failed candidate's parent), measured:\n"
        return [head + profile_prompt(prof, detail=d) for d in range(2, -1, -1)]
    prof, parent = ctx.profile, ctx.grandparent_profile
    if prof is None:
        return [NO_PROFILE]
    return [profile_prompt(prof, parent=parent, detail=d) for d in range(PROMPT_DETAIL_MAX, -1, -1)]


def template_name(ctx: OperatorContext) -> str:
    """The template of this step: draft only without a correct starting point (see the module doc)."""
    phase = "optimize" if ctx.phase == "draft" and ctx.parent.correct else ctx.phase
    return TEMPLATES.get(phase, "optimize.tmpl")


def knowledge_items(
    ctx: OperatorContext, budget_tokens: int, share: float = KNOWLEDGE_SHARE, rest_tokens: int = 0
) -> list[str]:
    """The knowledge documents (most relevant first) that keep to `share` of the prompt: of its budget,
    and of the whole prompt when the rest of it is `rest_tokens` (all of them for a share of 1: the
    budget's fitting alone decides)."""
    if share >= 1.0:
        return [f"### {title}\n{text}" for title, text in ctx.knowledge]
    out: list[str] = []
    room = int(budget_tokens * share)
    if rest_tokens:
        room = min(room, int(rest_tokens * share / (1.0 - share)))
    for title, text in ctx.knowledge:
        item = f"### {title}\n{text}"
        if estimate_tokens(item) > room:
            continue
        out.append(item)
        room -= estimate_tokens(item)
    return out


def _sections(ctx: OperatorContext, budget_tokens: int, share: float, fixed_tokens: int) -> list[Section]:
    attempts = [attempt_line(a) for a in ctx.attempts]
    profile = _profile_variants(ctx)
    tried = dropping(attempts, "\n", "- nothing yet")
    rest = fixed_tokens + estimate_tokens(profile[0]) + estimate_tokens(tried[0])
    knowledge = knowledge_items(ctx, budget_tokens, share, rest)
    sections = [
        Section("profile", PRIORITY["profile"], profile),
        Section("attempts", PRIORITY["attempts"], tried),
        Section("knowledge", PRIORITY["knowledge"], dropping(knowledge, "\n\n", "(none selected)")),
    ]
    failure = ctx.failure or "(none)"
    lines = failure.splitlines()
    short = "\n".join(
        lines[:30] + (["[... failure cut for the token budget ...]"] if len(lines) > 30 else [])
    )
    sections.append(
        Section("failure", PRIORITY["failure"], [failure, short] if short != failure else [failure])
    )
    return sections


def build_prompt(
    ctx: OperatorContext, budget_tokens: int = DEFAULT_PROMPT_TOKENS, knowledge_share: float = KNOWLEDGE_SHARE
) -> tuple[str, str, str, Fitted]:
    """(template name, system message, user message, what the budget chose) for this step."""
    name = template_name(ctx)
    system = read_template("system.md")
    fixed = {
        "target": ctx.problem.target,
        "machine": ctx.problem.machine,
        "problem_source": ctx.problem.source.strip(),
        "op_summary": f"\nRecognised ops: {ctx.problem.op_summary}\n" if ctx.problem.op_summary else "",
        "parent_id": str(ctx.parent.id),
        "parent_fitness": f"{ctx.parent.fitness:.3f}",
        "parent_code": ctx.parent_code.strip() or "# (no code yet)",
        "reference": reference_section(ctx.reference, problem_shapes(ctx.problem.source)),
        "constraints": "\n".join(f"- {c}" for c in ctx.constraints),
    }
    template = Template(read_template(name))
    skeleton = template.safe_substitute(
        fixed, profile="", attempts="", knowledge="", failure="", diagnosis=""
    )
    fixed_tokens = estimate_tokens(system) + estimate_tokens(skeleton)
    sections = _sections(ctx, budget_tokens, knowledge_share, fixed_tokens)
    fitted = fit(fixed_tokens, sections, budget_tokens)
    user = template.safe_substitute(fixed, **fitted.texts, diagnosis=fitted.texts["profile"])
    return name, system, user, fitted


def render_prompt(
    ctx: OperatorContext, budget_tokens: int = DEFAULT_PROMPT_TOKENS, knowledge_share: float = KNOWLEDGE_SHARE
) -> tuple[str, str, str]:
    """(template name, system message, user message) for this step, within `budget_tokens`."""
    name, system, user, _ = build_prompt(ctx, budget_tokens, knowledge_share)
    return name, system, user
