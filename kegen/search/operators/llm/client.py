"""A streaming chat-completions client for OpenAI-compatible servers, with deadlines and cancellation.

Why not the `openai` SDK: a proposal must never outlive its deadline (or the search), and an
abandoned request must stop the server generating. Here every call streams (`"stream": true`), reads
under a socket timeout equal to the time left before its deadline, and `cancel()` shuts down the
sockets of live calls from any thread; closing the connection is what makes llama.cpp and vLLM stop
generating. A stream that ends early keeps what it received: the partial text, the finish reason if
one came, and the server's token counts if it sent them, else counts estimated from the text and
marked `estimated`. The counts come from `usage` (asked for with `stream_options.include_usage`);
where a stream has none, from llama.cpp's native `timings` on its last chunk (llama-server puts them
there: `prompt_n` + `cache_n` prompt tokens, `predicted_n` generated). llama-cpp-python's server
sends neither (captured from 0.3.36: tests/search/fixtures_llm/) but one content chunk per token, so
the estimate is at least the number of content chunks.

The served context window is read from the server where it says it (`served_context`): llama.cpp's
`/props` (`n_ctx`), `/v1/models` (vLLM's `max_model_len`, llama.cpp's `meta.n_ctx`), llama-server's
`/slots` (`n_ctx`). A 400 that
names the window (llama.cpp, llama-cpp-python, vLLM and OpenAI all word it) is parsed by
`context_overflow`.

Proxies come from the environment as urllib reads them (`kegen.search.operators.llm.proxy`): an http
endpoint through the proxy with absolute URIs, an https one through a CONNECT tunnel.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from kegen.search.operators.llm.proxy import Proxy, proxy_for
from kegen.search.operators.llm.stream import ChatResult, MalformedReply, Stream, error_message

_OVERFLOW = (
    # vLLM / OpenAI / llama-cpp-python: "maximum context length is C tokens. However, you requested
    # T tokens (P in the messages, M in the completion)"
    re.compile(
        r"maximum context length is (\d+) tokens.*?requested (\d+) tokens \((\d+) in the (?:messages|prompt)",
        re.S,
    ),
    # llama-cpp-python (raw) and llama.cpp: "Requested tokens (P) exceed context window of C"
    re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)"),
)


@dataclass(frozen=True)
class Overflow:
    """A prompt over the served context, read from the server's 400: the window and the prompt's tokens."""

    context: int
    prompt_tokens: int | None


def context_overflow(message: str) -> Overflow | None:
    """The window and prompt size named by a server's context-length error, or None."""
    m = _OVERFLOW[0].search(message)
    if m:
        return Overflow(int(m.group(1)), int(m.group(3)))
    m = _OVERFLOW[1].search(message)
    if m:
        return Overflow(int(m.group(2)), int(m.group(1)))
    if "n_ctx" in message or "context size" in message or "context length" in message:
        nums = re.findall(r"n_ctx\"?\s*[:=]\s*(\d+)", message)
        prompt = re.findall(r"n_prompt_tokens\"?\s*[:=]\s*(\d+)", message)
        if nums:
            return Overflow(int(nums[0]), int(prompt[0]) if prompt else None)
    return None


class ChatClient:
    """Streams chat completions from `base_url` (…/v1); thread-safe, one connection per call.

    `proxy`: the HTTP proxy to go through (None: direct); by default the environment's (`proxy_for`).
    """

    def __init__(
        self, base_url: str, api_key: str = "", proxy: Proxy | Literal["environment"] | None = "environment"
    ) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"LLM base URL {base_url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1"
            )
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.path = parts.path
        self.netloc = parts.netloc.rsplit("@", 1)[-1]
        self.api_key = api_key
        self.proxy = proxy_for(self.scheme, self.host, self.port) if isinstance(proxy, str) else proxy
        self._live: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    # ---- connections --------------------------------------------------------------------------
    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        timeout = max(timeout, 0.01)
        if self.proxy is None:
            conn = cls(self.host, self.port, timeout=timeout)
        else:
            conn = cls(self.proxy.host, self.proxy.port, timeout=timeout)
            if self.scheme == "https":  # CONNECT, then TLS with the server through the tunnel
                conn.set_tunnel(self.host, self.port, headers=self.proxy.headers())
        with self._lock:
            self._live.add(conn)
        return conn

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._live.discard(conn)
        conn.close()

    def cancel(self) -> None:
        """Abort every live call now (their sockets are shut down: the server sees the client leave)."""
        self._cancelled.set()
        with self._lock:
            live = list(self._live)
        for conn in live:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        if self.proxy is not None and self.scheme == "http":
            h.update(self.proxy.headers())
        return h

    def _target(self, path: str) -> str:
        """The request target: the absolute URI through an http proxy, else the path."""
        if self.proxy is not None and self.scheme == "http":
            return f"http://{self.netloc}{path}"
        return path

    def _failure(self, exc: Exception) -> tuple[str, int | None, str]:
        """(status, HTTP status, message) of a connection failure, naming the proxy when one was used."""
        msg = f"{type(exc).__name__}: {exc}"
        if self.proxy is None:
            return "connection_error", None, msg
        p = self.proxy
        tunnel = re.match(r"Tunnel connection failed: (\d+)\s*(.*)", str(exc))
        if tunnel:
            code = int(tunnel.group(1))
            hint = (
                f"check the credentials in {p.source} (http://user:password@host:port)"
                if code == 407
                else f"check that the proxy may reach {self.netloc}, or list {self.host} in NO_PROXY"
            )
            return (
                "http_error",
                code,
                (
                    f"HTTP {code}: the proxy {p.url} (from {p.source}) refused to open a tunnel (CONNECT) to"
                    f" {self.netloc}: {code} {tunnel.group(2).strip()} — {hint}"
                ),
            )
        return (
            "connection_error",
            None,
            (
                f"{msg} (through the proxy {p.url} from {p.source}: check that it runs and is reachable,"
                f" or list {self.host} in NO_PROXY / set KEGEN_LLM_PROXY=direct)"
            ),
        )

    # ---- the served context -------------------------------------------------------------------
    def get_json(self, path: str, timeout: float = 5.0) -> Any:
        """GET `path` (absolute on the server) as JSON; None on any failure."""
        conn = self._connect(timeout)
        try:
            conn.request("GET", self._target(path), headers=self._headers())
            resp = conn.getresponse()
            body = resp.read()
            return json.loads(body) if resp.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            self._release(conn)

    def served_context(self, timeout: float = 5.0) -> tuple[int, str] | None:
        """(context window in tokens, where it was read) when the server says it, else None."""
        root = self.path[: -len("/v1")] if self.path.endswith("/v1") else self.path
        props = self.get_json(root + "/props", timeout)
        if isinstance(props, dict):
            n = props.get("n_ctx") or (props.get("default_generation_settings") or {}).get("n_ctx")
            if isinstance(n, int) and n > 0:
                return n, "/props n_ctx"
        models = self.get_json(self.path + "/models", timeout)
        for m in (models or {}).get("data", []) if isinstance(models, dict) else []:
            if not isinstance(m, dict):
                continue
            for key, where in (("max_model_len", "max_model_len"), ("context_length", "context_length")):
                if isinstance(m.get(key), int) and m[key] > 0:
                    return int(m[key]), f"/v1/models {where}"
            meta = m.get("meta") or {}
            if isinstance(meta, dict) and isinstance(meta.get("n_ctx"), int) and meta["n_ctx"] > 0:
                return int(meta["n_ctx"]), "/v1/models meta.n_ctx"
        slots = self.get_json(root + "/slots", timeout)  # llama-server: one entry per slot
        for slot in slots if isinstance(slots, list) else []:
            if isinstance(slot, dict) and isinstance(slot.get("n_ctx"), int) and slot["n_ctx"] > 0:
                return int(slot["n_ctx"]), "/slots n_ctx"
        return None

    # ---- one completion -----------------------------------------------------------------------
    def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float,
        deadline: float,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult:
        """One streamed completion that ends by `deadline` (a `time.monotonic()` value) at the latest;
        `tools` (OpenAI function definitions) are offered to the model when given."""
        start = time.monotonic()
        prompt_chars = "".join(_message_text(m) for m in messages)
        request: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"], request["tool_choice"] = tools, "auto"
            prompt_chars += json.dumps(tools)
        body = json.dumps(request)
        acc = Stream(start, max_tokens)
        if self.cancelled:
            return ChatResult("cancelled", error="the search stopped before the call was made")
        conn = self._connect(deadline - start)
        try:
            conn.request(
                "POST", self._target(self.path + "/chat/completions"), body=body, headers=self._headers()
            )
            _set_timeout(conn, deadline)
            resp = conn.getresponse()
            if resp.status != 200:
                text = resp.read().decode(errors="replace")
                via = ""
                if self.proxy is not None and resp.status == 407:
                    via = f" (the proxy {self.proxy.url} wants credentials: check {self.proxy.source})"
                out = acc.result(
                    "http_error", start, prompt_chars, http_status=resp.status,
                    error=f"HTTP {resp.status}: {error_message(text)}{via}",
                )  # fmt: skip
                try:
                    out.retry_after = float(resp.getheader("Retry-After") or "")
                except ValueError:
                    pass
                return out
            if "text/event-stream" not in (resp.getheader("Content-Type") or ""):
                acc.whole(resp.read())  # a server that ignored "stream": one JSON body
            else:
                while True:
                    _set_timeout(conn, deadline)
                    line = resp.readline()
                    if not line or acc.line(line):
                        break
            if not acc.done and self.cancelled:
                return acc.result("cancelled", start, prompt_chars, error="cancelled: the search stopped")
            if not acc.done:
                ended = "the stream ended before [DONE]"
                return acc.result("connection_error", start, prompt_chars, error=ended)
            return acc.result("ok", start, prompt_chars)
        except TimeoutError:
            return acc.result(
                "timeout", start, prompt_chars,
                error=f"no complete reply within the call's deadline ({time.monotonic() - start:.1f} s)",
            )  # fmt: skip
        except MalformedReply as exc:
            return acc.result("malformed", start, prompt_chars, error=f"malformed reply: {exc}")
        except (OSError, http.client.HTTPException) as exc:
            if self.cancelled:
                return acc.result("cancelled", start, prompt_chars, error="cancelled: the search stopped")
            status, code, message = self._failure(exc)
            return acc.result(status, start, prompt_chars, http_status=code, error=message)
        finally:
            self._release(conn)


def _set_timeout(conn: http.client.HTTPConnection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _message_text(message: dict[str, Any]) -> str:
    """The text a message puts in the prompt: its content and any tool calls it carries."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        text += json.dumps(call)
    return text
