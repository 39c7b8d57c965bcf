"""One chat completion's outcome (`ChatResult`) and the reader of its server-sent events (`Stream`).

A stream (or one JSON body, from a server that ignored `"stream": true`) accumulates into the reply
text, the finish reason, the tool calls the model made (OpenAI function calling: `delta.tool_calls`
fragments joined by index), the server's token counts (`usage`, else llama.cpp's native `timings`)
and when the first token came (the prompt's reading time, for throughput). Counts the server did not
send are estimated from the text, never below the number of content chunks (llama-cpp-python sends
one per token), and never above the reply budget when the server cut the reply (`finish_reason`
"length": it stopped at the budget, so the budget is the count).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kegen.search.operators.budget import estimate_tokens

RETRYABLE_STATUS = (408, 409, 429, 500, 502, 503, 504)


@dataclass
class ChatResult:
    """What one streamed completion produced, however it ended.

    `status`: ok | timeout | cancelled | http_error | connection_error | malformed. `text` holds what
    arrived (a partial reply when the call did not finish); `tool_calls` the functions the model
    called (`{"id", "name", "arguments"}`, arguments as the JSON text it wrote). Token counts come
    from the server (`tokens_source` usage | timings) when it sent them, else they are estimated
    from the text (`tokens_estimated`, `tokens_source` estimated). `first_token_s`: seconds from the
    request to the first content or tool-call chunk (None when none came).
    """

    status: str
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    tokens_source: str = "usage"  # usage | timings (llama.cpp's) | estimated
    latency_s: float = 0.0
    http_status: int | None = None
    error: str | None = None
    retry_after: float | None = None  # the server's Retry-After, seconds
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    first_token_s: float | None = None

    @property
    def retryable(self) -> bool:
        """A failure that another attempt may not repeat (rate limits, 5xx, dropped connections)."""
        if self.status == "connection_error":
            return True
        return self.status == "http_error" and self.http_status in RETRYABLE_STATUS


class MalformedReply(ValueError):
    """A reply that is not an OpenAI chat completion."""


def error_message(text: str) -> str:
    """The message of an OpenAI-style error body (or the body's head)."""
    try:
        err = json.loads(text)
    except ValueError:
        return text.strip()[:500]
    if isinstance(err, dict):
        e = err.get("error", err)
        if isinstance(e, dict) and e.get("message"):
            return str(e["message"])[:1000]
        if isinstance(e, str):
            return e[:1000]
    return text.strip()[:500]


class Stream:
    """Accumulates server-sent events (or one JSON body) into text, tool calls, finish reason and usage."""

    def __init__(self, start: float | None = None, max_tokens: int | None = None) -> None:
        self.start = time.monotonic() if start is None else start
        self.max_tokens = max_tokens
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}  # tool calls by index, arguments joined
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None  # llama.cpp's native counts on the last chunk
        self.first: float | None = None
        self.chunks = 0
        self.done = False

    def line(self, raw: bytes) -> bool:
        """Take one SSE line; True at the end of the stream."""
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return True
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise MalformedReply(f"an event is not JSON: {data[:80]!r}") from exc
        if isinstance(event, dict) and "error" in event:
            raise MalformedReply(f"the server sent an error mid-stream: {error_message(data)}")
        self._take(event, delta=True)
        return False

    def whole(self, body: bytes) -> None:
        try:
            event = json.loads(body)
        except ValueError as exc:
            raise MalformedReply(f"the body is not JSON: {body[:80]!r}") from exc
        self._take(event, delta=False)
        self.done = True

    def _seen(self) -> None:
        if self.first is None:
            self.first = time.monotonic() - self.start

    def _take(self, event: Any, delta: bool) -> None:
        if not isinstance(event, dict):
            raise MalformedReply("an event is not a JSON object")
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        if isinstance(event.get("timings"), dict) and isinstance(event["timings"].get("predicted_n"), int):
            self.timings = event["timings"]
        for choice in event.get("choices") or []:
            part = (choice.get("delta") if delta else choice.get("message")) or {}
            content = part.get("content") if isinstance(part, dict) else None
            if content:
                self._seen()
                self.parts.append(str(content))
                self.chunks += 1
            for n, call in enumerate((part.get("tool_calls") or []) if isinstance(part, dict) else []):
                self._tool_fragment(call, n)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        if not delta and not event.get("choices"):
            raise MalformedReply("the body has no choices")

    def _tool_fragment(self, call: Any, position: int) -> None:
        """One `tool_calls` entry: a whole call (a body) or a fragment of one (a stream, by index)."""
        if not isinstance(call, dict):
            raise MalformedReply("a tool call is not a JSON object")
        self._seen()
        index = call.get("index", position)
        index = index if isinstance(index, int) else position
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        fn = call.get("function") or {}
        if call.get("id"):
            slot["id"] = str(call["id"])
        if isinstance(fn, dict):
            if fn.get("name"):
                slot["name"] += str(fn["name"]) if not slot["name"] else ""
            args = fn.get("arguments")
            if isinstance(args, dict):  # some servers send the object itself
                slot["arguments"] = json.dumps(args)
            elif args:
                slot["arguments"] += str(args)
        self.chunks += 1

    def result(
        self,
        status: str,
        start: float,
        prompt_chars: str,
        http_status: int | None = None,
        error: str | None = None,
    ) -> ChatResult:
        text = "".join(self.parts)
        u, source = self.usage or {}, "usage"
        if not (self.usage and self.done) and self.timings is not None:
            t, source = self.timings, "timings"
            u = {"prompt_tokens": int(t.get("prompt_n") or 0) + int(t.get("cache_n") or 0),
                 "completion_tokens": t["predicted_n"]}  # fmt: skip
        prompt = int(u.get("prompt_tokens") or 0)
        completion = int(u.get("completion_tokens") or 0)
        estimated = not (u and self.done)
        if estimated:  # no final usage: what the server said so far, else the text's estimate
            prompt = prompt or (estimate_tokens(prompt_chars) if http_status is None else 0)
            args = "".join(c["name"] + c["arguments"] for c in self.calls.values())
            completion = max(completion, self.chunks, estimate_tokens(text + args) if text or args else 0)
            if self.finish == "length" and self.max_tokens:  # cut at the budget: it is the count
                completion = min(completion, self.max_tokens)
        calls = [
            {"id": c["id"] or f"call_{i}", "name": c["name"], "arguments": c["arguments"]}
            for i, c in sorted(self.calls.items())
        ]
        return ChatResult(
            status=status,
            text=text,
            finish_reason=self.finish,
            prompt_tokens=prompt,
            completion_tokens=completion,
            tokens_estimated=estimated and (prompt + completion) > 0,
            tokens_source="estimated" if estimated else source,
            latency_s=time.monotonic() - start,
            http_status=http_status,
            error=error,
            tool_calls=calls,
            first_token_s=self.first,
        )
