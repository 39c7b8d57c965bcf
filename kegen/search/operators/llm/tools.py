"""kegen's own tools, offered to the LLM by OpenAI function calling (the agent operator).

- `compile`: lower a candidate (the parent's code by default) and read one stage (ttir, tile, llir,
  rvasm) of one kernel, or the compile error with its source line;
- `run`: check a candidate for correctness on the problem's inputs (one trial, no timing detail);
- `profile`: the simulator's profile of a candidate (time, PEs with work, units' utilisation and
  stalls, the hottest lines) as the Profile schema's fields and its prompt rendering;
- `search_knowledge`: the knowledge base's best documents for a query;
- `parent`: the parent's code, its diff from the grandparent, or its measured profile.

A candidate's code runs only in the sandboxed evaluation path (`tool_worker`: `kegen.eval` in a
worker process). Every step has a budget (`ToolBudget`: calls, tokens of results, seconds); every
result is a JSON object whose text is capped (`cap`), and every call is kept (`ToolBox.records`)
for the graph store and `kegen report`.
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass
from typing import Any

from kegen.profiling import Profile
from kegen.profiling.render import prompt as profile_prompt
from kegen.profiling.render import source_view
from kegen.search.operators.budget import CHARS_PER_TOKEN, estimate_tokens
from kegen.search.operators.context import OperatorContext
from kegen.search.operators.llm.tool_worker import STAGES, ToolEval

RESULT_TOKENS = 1200  # one result, at most
ARG_CHARS = 2000  # of a call's arguments kept in the record

_CODE = {"type": "string", "description": "the whole candidate module (default: the parent's code)"}
TOOL_SPECS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "compile",
        "description": "Lower a candidate's Triton kernels for the target and read one stage, or get the"
        " compile error with its source line.",
        "parameters": {"type": "object", "properties": {
            "code": _CODE,
            "stage": {"type": "string", "enum": list(STAGES), "description": "default tile"},
            "kernel": {"type": "string", "description": "the @triton.jit function (default: the first)"},
        }},
    }},
    {"type": "function", "function": {
        "name": "run",
        "description": "Run a candidate on the problem's inputs (sandboxed) and check it against the"
        " PyTorch reference: status, error and source line, max abs error.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    }},
    {"type": "function", "function": {
        "name": "profile",
        "description": "Profile a candidate on the simulated chip: time, PEs with work, units'"
        " utilisation and stalls, hottest source lines, the bottleneck.",
        "parameters": {"type": "object", "properties": {"code": _CODE}},
    }},
    {"type": "function", "function": {
        "name": "search_knowledge",
        "description": "Search kegen's hardware knowledge base (programming guides, cost model, examples).",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }},
    {"type": "function", "function": {
        "name": "parent",
        "description": "The parent candidate: its code, its diff from its parent, or its measured profile.",
        "parameters": {"type": "object", "properties": {
            "what": {"type": "string", "enum": ["code", "diff", "profile"]},
        }, "required": ["what"]},
    }},
]  # fmt: skip
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOL_SPECS)


@dataclass(frozen=True)
class ToolBudget:
    """What one step may spend on tools: calls, tokens of results sent back, seconds in tools."""

    calls: int = 6
    tokens: int = 3000
    wall_s: float = 180.0


def cap(text: str, tokens: int) -> str:
    """`text` cut to about `tokens` tokens, saying how much was left out."""
    limit = int(max(tokens, 16) * CHARS_PER_TOKEN)
    if len(text) <= limit:
        return text
    keep = max(limit - 48, 0)
    return text[:keep] + f"\n[... {len(text) - keep} more characters cut]"


class ToolBox:
    """Runs one step's tool calls within its budget; `records` keeps every call and result."""

    def __init__(self, ctx: OperatorContext, run_eval: ToolEval, budget: ToolBudget, kb: Any = None) -> None:
        self.ctx, self.run_eval, self.budget, self.kb = ctx, run_eval, budget, kb
        self.records: list[dict[str, Any]] = []
        self.tokens = 0
        self.wall_s = 0.0

    def left(self) -> bool:
        """Whether another call fits the budget."""
        b = self.budget
        return len(self.records) < b.calls and self.tokens < b.tokens and self.wall_s < b.wall_s

    def call(self, name: str, arguments: str, turn: int = 0) -> str:
        """Run one call; returns the JSON text sent back to the model (also kept in `records`)."""
        t0 = time.monotonic()
        record: dict[str, Any] = {"turn": turn, "name": name, "arguments": arguments[:ARG_CHARS]}
        if not self.left():
            result: dict[str, Any] = {
                "error": "the tool budget of this step is spent: answer with the code now"
            }
            record["status"] = "budget"
        else:
            try:
                args = json.loads(arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("the arguments are not a JSON object")
                result = self._dispatch(name, args)
                record["status"] = "error" if "error" in result else "ok"
            except (ValueError, TypeError) as exc:
                result, record["status"] = {"error": f"bad arguments for {name}: {exc}"}, "error"
        room = max(min(RESULT_TOKENS, self.budget.tokens - self.tokens), 32)
        text = _fit(result, room)
        record["wall_s"] = round(time.monotonic() - t0, 3)
        record["tokens"] = estimate_tokens(text)
        record["result"] = text
        self.records.append(record)
        self.tokens += record["tokens"]
        self.wall_s += record["wall_s"]
        return text

    # ---- the tools ----------------------------------------------------------------------------
    def _dispatch(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "search_knowledge":
            return self._knowledge(str(args.get("query") or ""))
        if name == "parent":
            return self._parent(str(args.get("what") or "code"))
        if name not in ("compile", "run", "profile"):
            return {"error": f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"}
        code = args.get("code") or self.ctx.parent_code
        if not isinstance(code, str) or not code.strip():
            return {"error": "no code: pass the whole candidate module as `code`"}
        left = max(self.budget.wall_s - self.wall_s, 5.0)
        p = self.ctx.problem
        out = self.run_eval(str(p.path), code, name, p.target, p.machine, left)
        if name == "compile":
            return _compile_result(out, str(args.get("stage") or "tile"), args.get("kernel"))
        if name == "profile":
            return _profile_result(out, code)
        return {k: out.get(k) for k in ("status", "message", "source_line", "max_abs_error") if out.get(k)}

    def _knowledge(self, query: str) -> dict[str, Any]:
        if not query.strip():
            return {"error": "an empty query"}
        if self.kb is None:
            return {"error": "no knowledge base is available in this search"}
        hits = []
        for entry, score in self.kb.search(query)[:3]:
            try:
                doc = self.kb.read(entry.path)
            except Exception:  # an unreadable document is skipped, not fatal
                continue
            hits.append({"path": entry.path, "title": doc.title, "score": round(score, 2), "text": doc.text})
        return {"documents": hits} if hits else {"documents": [], "note": f"nothing matches {query!r}"}

    def _parent(self, what: str) -> dict[str, Any]:
        ctx = self.ctx
        if what == "code":
            return {"node": ctx.parent.id, "code": ctx.parent_code}
        if what == "diff":
            before = getattr(ctx, "grandparent_code", "") or ""
            if not before:
                return {
                    "node": ctx.parent.id,
                    "note": "the parent is the root: it has no parent to differ from",
                }
            diff = difflib.unified_diff(
                before.splitlines(), ctx.parent_code.splitlines(), "grandparent.py", "parent.py", lineterm=""
            )
            return {"node": ctx.parent.id, "description": ctx.parent.description, "diff": "\n".join(diff)}
        if what == "profile":
            if ctx.profile is None:
                return {
                    "node": ctx.parent.id,
                    "note": "the parent was not measured (it failed or is the draft)",
                }
            return {"node": ctx.parent.id, **_profile_fields(ctx.profile, ctx.grandparent_profile)}
        return {"error": f"unknown `what` {what!r}: code, diff or profile"}


def _fit(result: dict[str, Any], tokens: int) -> str:
    """The result as JSON within `tokens` (valid JSON: its longest text fields are cut first)."""
    text = json.dumps(result)
    limit = int(tokens * CHARS_PER_TOKEN)
    for _ in range(8):
        if len(text) <= limit:
            return text
        texts = [(k, v) for k, v in result.items() if isinstance(v, str) and len(v) > 64]
        if not texts:
            break
        k, v = max(texts, key=lambda kv: len(kv[1]))
        keep = max(len(v) - (len(text) - limit) - 64, 0)  # JSON escapes may need another round
        result = {**result, k: v[:keep] + f"\n[... {len(v) - keep} more characters cut]"}
        text = json.dumps(result)
    if len(text) <= limit:
        return text
    head = text[: max(limit - 80, 0)]
    return json.dumps({"error": "the result was too large for the tool budget", "head": head})


def _compile_result(out: dict[str, Any], stage: str, kernel: Any) -> dict[str, Any]:
    if stage not in STAGES:
        return {"error": f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}"}
    res: dict[str, Any] = {"status": out.get("status")}
    if out.get("status") == "compile_error" or not out.get("stages"):
        res.update({k: out.get(k) for k in ("message", "source_line") if out.get(k)})
        return res
    stages: dict[str, dict[str, str]] = out["stages"]
    name = kernel if isinstance(kernel, str) and kernel in stages else next(iter(stages))
    res.update(
        kernels=sorted(stages), kernel=name, stage=stage, text=stages[name].get(stage, "(no such stage)")
    )
    if out.get("status") != "ok":  # compiled, then failed at run time or in the check
        res.update({k: out.get(k) for k in ("message", "source_line") if out.get(k)})
    return res


def _profile_fields(prof: Profile, parent: Profile | None = None) -> dict[str, Any]:
    """The Profile schema's key fields and its prompt rendering."""
    return {
        "time_s": prof.time_s,
        "bottleneck": prof.bottleneck.kind if prof.bottleneck is not None else None,
        "pes": [
            {"kernel": x.kernel, "grid": x.grid, "pes_used": x.pes_used, "pes_total": x.pes_total}
            for x in prof.launches
        ],
        "units": [
            {"name": u.name, "utilization": round(u.utilization or 0.0, 3), "stall_cycles": u.stall_cycles}
            for u in prof.units
        ],
        "stalls": {k: round(v, 3) for k, v in prof.stall_shares.items()},
        "rendered": profile_prompt(prof, parent=parent, detail=3),
    }


def _profile_result(out: dict[str, Any], code: str) -> dict[str, Any]:
    res: dict[str, Any] = {"status": out.get("status")}
    if out.get("status") != "ok":
        res.update({k: out.get(k) for k in ("message", "source_line", "max_abs_error") if out.get(k)})
    if not out.get("profile"):
        return res
    try:
        prof = Profile.from_dict(out["profile"])
    except (TypeError, ValueError) as exc:
        return {**res, "error": f"the profile could not be read: {exc}"}
    from kegen.profiling.source import fill_source_text

    fill_source_text(prof.lines, code)
    res.update(_profile_fields(prof))
    if prof.lines:
        res["source"] = source_view(prof, top=6)
    return res
