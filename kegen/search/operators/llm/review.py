"""The reviewer pass (`--llm-review`): a second call reads a child against its parent before it is
timed and flags semantic shortcuts or shape assumptions.

The finding is recorded (the call on the node, with reply kind `review`, and `review` in the node's
operator meta) and never trusted over the evaluator: the child is evaluated either way.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from kegen.search.operators.base import LLMCallRecord
from kegen.search.operators.budget import estimate_tokens
from kegen.search.operators.context import OperatorContext

if TYPE_CHECKING:
    from kegen.search.operators.llm.operator import LLMOperator

REVIEW_TOKENS = 256
DIFF_CHARS = 12_000
SYSTEM = (
    "You review a Triton candidate before it is timed, against its parent. Flag any semantic shortcut"
    " (work skipped, outputs cached or reused across calls, precision lowered, inputs modified, torch ops"
    " computing the result) and any assumption about shapes, strides or dtypes that the problem does not"
    " guarantee (hard-coded sizes, missing masks on ragged edges). Answer OK when there is none, else one"
    " line per finding, each starting with '- '."
)


def review(op: LLMOperator, model: str, ctx: OperatorContext, code: str) -> tuple[LLMCallRecord, str]:
    """One review call of `code` (a child of `ctx.parent`); returns the call and its finding: "ok",
    the flagged lines, or why there is none (the call failed)."""
    lines = difflib.unified_diff(
        ctx.parent_code.splitlines(), code.splitlines(), "parent.py", "child.py", lineterm=""
    )
    diff = "\n".join(lines)
    user = (
        f"## Problem (PyTorch reference)\n```python\n{ctx.problem.source.strip()}\n```\n\n"
        f"## The child's change from its parent\n```diff\n{diff[:DIFF_CHARS] or '(no change)'}\n```\n"
    )
    rec = LLMCallRecord(model=model, attempts=0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    deadline = op._deadline(estimate_tokens(SYSTEM + user), REVIEW_TOKENS)
    result = op.turn(rec, messages, REVIEW_TOKENS, deadline)
    op._cost(rec)
    rec.reply, rec.finish_reason, rec.reply_kind = result.text or None, result.finish_reason, "review"
    rec.status = "ok" if result.status == "ok" else "error"
    rec.error = None if result.status == "ok" else result.error
    if result.status != "ok":
        return rec, f"no review: {result.error or result.status}"
    text = result.text.strip()
    flagged = [line.strip() for line in text.splitlines() if line.strip().startswith("- ")]
    if flagged:
        return rec, "\n".join(flagged)
    return rec, "ok" if text.upper().startswith("OK") else f"unclear: {text[:200]}"
