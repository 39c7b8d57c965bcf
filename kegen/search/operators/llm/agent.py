"""The agent operator: the LLM calls kegen's tools (compile, run, profile, knowledge, the parent)
before it answers, by OpenAI function calling.

One proposal is a conversation: the prompt (leaner than the single-shot one: hardware notes are a
tool away) and the tool definitions go out; while the model answers with `tool_calls` and the step's
tool budget lasts (`OperatorConfig.tool_calls`, `tool_tokens`, `tool_wall_s`), the calls are run
(`tools.ToolBox`; candidate code only in the sandboxed evaluation path) and their results sent back;
the first answer without tool calls is read like a single-shot reply (`replies.read_reply`) and its
code evaluated. Once the budget is spent the model is asked once more, without tools, for the code.
Every turn is an LLM call on the node; every tool call and result is on the node too (the
`tool_calls` artifact, shown by `kegen report`).

A server that refuses `tools` (an HTTP error naming tools or functions) is detected at the first
proposal: that proposal and every later one are single-shot (`LLMOperator.propose`), and the reason
is recorded in the proposal's meta (`agent_tools`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kegen.search.config import OperatorConfig
from kegen.search.operators.base import LLMCallRecord, Proposal
from kegen.search.operators.budget import estimate_tokens
from kegen.search.operators.context import OperatorContext
from kegen.search.operators.llm.client import ChatClient, context_overflow
from kegen.search.operators.llm.operator import LLMOperator, _first_sentence
from kegen.search.operators.llm.prompt import render_prompt
from kegen.search.operators.llm.replies import Reading, read_reply
from kegen.search.operators.llm.stream import ChatResult
from kegen.search.operators.llm.tool_worker import ToolEval, ToolRunner
from kegen.search.operators.llm.tools import TOOL_SPECS, ToolBox, ToolBudget

AGENT_KNOWLEDGE_SHARE = 0.1
AGENT_NOTE = """

## Tools
Before you answer you may call kegen's tools: `compile` (lower a candidate, read a stage or its
compile error), `run` (correctness on the problem's inputs), `profile` (the simulator's profile),
`search_knowledge` (hardware notes), `parent` (the parent's code, diff or profile). Pass a whole
module as `code`; without it they use the parent. When you are done, answer without tool calls:
the complete new module in one ```python block (or SEARCH/REPLACE edits of the parent)."""
BUDGET_SPENT = "The tool budget of this step is spent. Answer now with the code, without tool calls."
_NO_TOOLS = re.compile(r"tool|function", re.I)


class AgentOperator(LLMOperator):
    """Writes children with an LLM that may call kegen's tools first (single-shot without tool support)."""

    name = "agent"

    def __init__(
        self,
        config: OperatorConfig,
        seed: int = 0,
        client: ChatClient | None = None,
        tool_eval: ToolEval | None = None,
        knowledge: Any = None,
    ) -> None:
        super().__init__(config, seed=seed, client=client)
        self.tool_eval: ToolEval = tool_eval or ToolRunner()
        self.kb = knowledge
        self._kb_loaded = knowledge is not None
        self.tools_unsupported: str | None = None  # why, once detected

    def restore(self, proposal: Proposal) -> None:
        super().restore(proposal)
        if reason := proposal.meta.get("agent_tools"):
            self.tools_unsupported = self.tools_unsupported or str(reason)

    def cancel(self) -> None:
        super().cancel()
        close = getattr(self.tool_eval, "close", None)
        if close is not None:
            close()

    def _knowledge_base(self) -> Any:
        with self._lock:
            if not self._kb_loaded:
                self._kb_loaded = True
                from kegen.search.operators.context import load_knowledge_base

                self.kb = load_knowledge_base()
            return self.kb

    def _tool_budget(self) -> ToolBudget:
        c = self.config
        tokens = c.tool_tokens or ((self.context // 3) if self.context else 6000)
        return ToolBudget(calls=c.tool_calls, tokens=tokens, wall_s=c.tool_wall_s)

    # ---- one proposal -------------------------------------------------------------------------
    def propose(self, ctx: OperatorContext) -> Proposal:
        if (
            self.tools_unsupported is not None
            or self.fallback_reason is not None
            or not self.config.tool_calls
        ):
            return super().propose(ctx)
        if self.config.max_calls and self.proposals >= self.config.max_calls:
            return super().propose(ctx)  # the limit's fallback
        with self._lock:
            model = self.bandit.choose()
            self.proposals += 1
        prompt_budget, reply_tokens = self.budgets()
        budget = self._tool_budget()
        template, system, user = render_prompt(
            ctx, max(prompt_budget - budget.tokens, 512), AGENT_KNOWLEDGE_SHARE
        )
        system += AGENT_NOTE
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        box = ToolBox(ctx, self.tool_eval, budget, self._knowledge_base())
        records: list[LLMCallRecord] = []
        result = ChatResult("cancelled", error="no call was made")
        for turn in range(budget.calls + 2):
            tools = TOOL_SPECS if box.left() else None
            if tools is None and messages[-1]["role"] == "tool":
                messages.append({"role": "user", "content": BUDGET_SPENT})
            rec = LLMCallRecord(model=model, attempts=0)
            deadline = self._deadline(estimate_tokens(json.dumps(messages)), reply_tokens)
            result = self.turn(rec, messages, reply_tokens, deadline, tools)
            self._cost(rec)
            rec.reply, rec.finish_reason = _transcript(result), result.finish_reason
            records.append(rec)
            if tools and turn == 0 and (why := _refuses_tools(result)):
                with self._lock:
                    self.tools_unsupported = why
                    self.proposals -= 1  # the single-shot call below is this proposal's
                rec.reply_kind, rec.status, rec.error = "http_error", "error", result.error
                single = super().propose(ctx)
                single.llm_calls[:0] = records
                single.meta["agent_tools"] = why
                return single
            if result.status != "ok" or not result.tool_calls or tools is None:
                break
            rec.reply_kind, rec.status = "tool_calls", "ok"
            messages.append(_assistant(result))
            for call in result.tool_calls:
                text = box.call(call["name"], call["arguments"], turn)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        reading = read_reply(result, system + "\n" + user, ctx.parent_code, reply_tokens)
        if reading.kind == "empty" and result.tool_calls:
            reading = Reading("no_code", error="the model called tools again after its tool budget was spent")
        last = records[-1]
        last.reply_kind = reading.kind
        last.status = "ok" if result.status == "ok" else "error"
        last.error = None if result.status == "ok" else result.error
        proposal = Proposal(
            None,
            "",
            self.name,
            template=template,
            prompt=user,
            llm_calls=records,
            meta={"tool_calls": len(box.records)},
            tool_calls=box.records,
        )
        used = f" after {len(box.records)} tool calls" if box.records else ""
        return self.finish(reading, model, ctx, proposal, f"{used}: {_first_sentence(result.text)}")


def _refuses_tools(result: ChatResult) -> str | None:
    """Why the server does not take `tools` (an error that names them), else None."""
    if result.status != "http_error" or result.http_status not in (400, 404, 422, 500, 501):
        return None
    message = result.error or ""
    if context_overflow(message) is not None or not _NO_TOOLS.search(message):
        return None
    return f"the server does not take tools ({message[:200]}); single-shot proposals"


def _assistant(result: ChatResult) -> dict[str, Any]:
    """The assistant's turn that called tools, as the next request must repeat it."""
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"] or "{}"},
        }
        for c in result.tool_calls
    ]
    return {"role": "assistant", "content": result.text or None, "tool_calls": calls}


def _transcript(result: ChatResult) -> str | None:
    """The reply as stored: its text, then the tool calls it made."""
    calls = "\n".join(f"[tool call] {c['name']}({c['arguments'][:300]})" for c in result.tool_calls)
    text = "\n".join(x for x in (result.text, calls) if x)
    return text or None
