"""What an LLM reply was: usable code, or why not (echo, truncated, no code, malformed, a failed call).

Every call of the LLM operator ends as one `Reading` whose `kind` is recorded per node (graph store)
and counted in the search summary and `kegen report`:

- `code`: a candidate was taken from the reply;
- `echo`: the reply only repeats kegen's prompt (its instructions' example edit, the parent's code);
- `truncated`: the server stopped at the token limit (finish reason `length`) before usable code;
- `no_code`, `malformed` (code that does not parse, lacks ModelNew, or edits lines the parent lacks),
  `empty`;
- a failed call: `timeout`, `context_overflow` (the prompt is larger than the served window),
  `http_error`, `unreachable`, `bad_response` (a body that is not an OpenAI reply), `cancelled`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kegen.search.operators.extract import extract_code, normalize
from kegen.search.operators.llm.client import ChatResult, context_overflow

USABLE = "code"
CALL_FAILURES = ("timeout", "context_overflow", "http_error", "unreachable", "bad_response", "cancelled")
REPLY_KINDS = (USABLE, "echo", "truncated", "no_code", "malformed", "empty", *CALL_FAILURES)
_STATUS_KIND = {
    "timeout": "timeout",
    "cancelled": "cancelled",
    "connection_error": "unreachable",
    "malformed": "bad_response",
}
ECHO_LINE_FRACTION = 0.6  # a code-less reply whose lines are mostly the prompt's is an echo


@dataclass(frozen=True)
class Reading:
    """A reply's kind, its code when usable, and the failure message and node verdict when not."""

    kind: str
    code: str | None = None
    form: str = "none"  # file | edits | none: how the code was written
    error: str | None = None

    @property
    def verdict(self) -> str | None:
        """The node's verdict when there is no code: invalid_code for malformed code, else no_code."""
        if self.code is not None:
            return None
        return "invalid_code" if self.kind == "malformed" else "no_code"


def read_reply(result: ChatResult, prompt: str, parent_code: str, max_tokens: int) -> Reading:
    """Classify one call's outcome; `prompt` is the system and user text that was sent."""
    if result.status != "ok":
        kind = _STATUS_KIND.get(result.status, "http_error")
        if result.status == "http_error" and context_overflow(result.error or ""):
            kind = "context_overflow"
        return Reading(kind, error=result.error or result.status)
    text = result.text
    if not text.strip():
        return Reading("empty", error=f"the reply is empty (finish reason {result.finish_reason or 'none'})")
    got = extract_code(text, parent_code, prompt)
    if got.code is not None:
        return Reading(USABLE, got.code, got.kind)
    if got.kind == "echo":
        return Reading("echo", error=got.error)
    if result.finish_reason == "length":
        return Reading(
            "truncated",
            form=got.kind,
            error=f"the reply was cut at the token limit ({max_tokens} tokens) before its code was complete"
            + (f" ({got.error})" if got.error else ""),
        )
    if result.finish_reason is None and text.count("```") % 2 == 1:  # e.g. a server that interrupts
        return Reading(
            "truncated",
            form=got.kind,
            error="the stream ended inside an open code block, without a finish reason (interrupted?)",
        )
    if got.verdict == "invalid_code":
        return Reading("malformed", form=got.kind, error=got.error)
    if _mostly_copied(text, prompt):
        return Reading("echo", error="the reply repeats the prompt's text and has no code")
    return Reading("no_code", error=got.error or "the reply has no code")


def _mostly_copied(text: str, prompt: str) -> bool:
    lines = [s for s in normalize(text).splitlines() if len(s) >= 20]
    if len(lines) < 3:
        return False
    seen = set(normalize(prompt).splitlines())
    return sum(s in seen for s in lines) >= ECHO_LINE_FRACTION * len(lines)
