"""A scripted OpenAI-compatible server that calls tools (function calling), for the agent tests.

Each chat request takes the next step of the script (then `default`):

- `("tools", [(name, {arguments}), ...])`: the assistant calls these functions (finish reason
  "tool_calls"); streamed as OpenAI does (the id and name first, the arguments in fragments);
- `("reply", text)`: a plain answer.

`stream=False` answers every request with one JSON body (a server that ignores `"stream": true`);
`tools=False` refuses any request that offers `tools` with a 400 naming them (as servers without
function calling do); `n_ctx` is said by `/slots` (llama-server's) when `slots` is set.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.search.scripted_server import JsonHandler, ScriptedServer


class ToolLLM(ScriptedServer):
    """The server and its script; a context manager (`url` is the …/v1 base URL)."""

    def __init__(
        self,
        script: list[tuple[Any, ...]] | None = None,
        *,
        default: tuple[Any, ...] = ("reply", "no code today"),
        stream: bool = True,
        tools: bool = True,
        slots: int = 0,
    ) -> None:
        self.stream, self.tools, self.slots = stream, tools, slots
        super().__init__(script, default, _handler)


def _handler(fake: ToolLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/slots" and fake.slots:
                self._json(200, [{"id": 0, "n_ctx": fake.slots, "is_processing": False}])
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "File Not Found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with fake._lock:
                fake.requests.append(body)
            if body.get("tools") and not fake.tools:
                self._json(400, {"error": {"message": "tools are not supported by this chat format"}})
                return
            kind, arg = fake.next_step()
            calls = []
            if kind == "tools":
                calls = [
                    {"id": f"call_{len(fake.requests)}_{i}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}
                    for i, (name, args) in enumerate(arg)
                ]  # fmt: skip
            text = arg if kind == "reply" else ""
            finish = "tool_calls" if calls else "stop"
            usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
            if not fake.stream:
                message: dict[str, Any] = {"role": "assistant", "content": text or None}
                if calls:
                    message["tool_calls"] = calls
                choice = {"index": 0, "message": message, "finish_reason": finish}
                self._json(200, {"object": "chat.completion", "choices": [choice], "usage": usage})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(text), 16):
                self._event({"choices": [{"index": 0, "delta": {"content": text[i : i + 16]}}]})
            for i, c in enumerate(calls):  # OpenAI's shape: id and name first, arguments in pieces
                head = {"index": i, "id": c["id"], "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": ""}}  # fmt: skip
                self._event({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
                args = c["function"]["arguments"]
                for j in range(0, len(args), 7):
                    piece = {"index": i, "function": {"arguments": args[j : j + 7]}}
                    self._event({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            self._event({"choices": [], "usage": usage})
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _event(self, obj: dict[str, Any]) -> None:
            self._chunk(f"data: {json.dumps(obj)}\n\n".encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
