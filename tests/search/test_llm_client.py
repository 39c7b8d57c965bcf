"""The streaming chat client: replies, usage, finish reasons, deadlines, cancellation, the served window."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from kegen.search.operators.budget import estimate_tokens
from kegen.search.operators.llm.client import ChatClient, context_overflow
from tests.search.llm_fake_server import FakeLLM

FIXTURES = Path(__file__).parent / "fixtures_llm"
MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write code " * 30}]


def _call(url: str, budget_s: float = 5.0, client: ChatClient | None = None):
    c = client or ChatClient(url, "key")
    return c.complete("m", MSGS, max_tokens=100, temperature=0.0, deadline=time.monotonic() + budget_s)


def _wait_for(cond, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_streamed_reply_usage_and_finish_reason() -> None:
    with FakeLLM([("reply", "hello " * 20)]) as fake:
        r = _call(fake.url)
    assert r.status == "ok" and r.text == "hello " * 20 and r.finish_reason == "stop"
    assert r.completion_tokens == 8 and r.prompt_tokens == len("be brief" + "write code " * 30) // 3
    assert not r.tokens_estimated
    req = fake.requests[0]
    assert (
        req["stream"] is True
        and req["stream_options"] == {"include_usage": True}
        and req["max_tokens"] == 100
    )


def test_reply_without_usage_is_estimated() -> None:
    with FakeLLM([("length", "x" * 70, {"usage": False})]) as fake:
        r = _call(fake.url)
    assert r.status == "ok" and r.finish_reason == "length" and r.tokens_estimated
    assert r.completion_tokens >= 5 and r.prompt_tokens > 0


def test_deadline_ends_the_call_and_the_server_stops_generating() -> None:
    with FakeLLM([("hang", 30.0)]) as fake:
        t0 = time.monotonic()
        r = _call(fake.url, budget_s=0.6)
        took = time.monotonic() - t0
        assert _wait_for(lambda: fake.aborted == 1), "the server kept generating for a client that left"
    assert r.status == "timeout" and took < 1.5 and "deadline" in (r.error or "")
    assert r.text.startswith("thinking") and r.tokens_estimated and r.completion_tokens > 0


def test_cancel_from_another_thread() -> None:
    with FakeLLM([("hang", 30.0)]) as fake:
        client = ChatClient(fake.url)
        out = []
        th = threading.Thread(target=lambda: out.append(_call(fake.url, 30.0, client)))
        th.start()
        assert _wait_for(lambda: fake.active == 1)
        t0 = time.monotonic()
        client.cancel()
        th.join(3.0)
        assert not th.is_alive() and time.monotonic() - t0 < 1.0
        assert _wait_for(lambda: fake.aborted == 1)
    assert out[0].status == "cancelled"
    assert _call(fake.url, client=client).status == "cancelled"  # no new call after a cancel


def test_http_errors_and_unreachable() -> None:
    with FakeLLM([("status", 503, "busy"), ("status", 401, "bad key")]) as fake:
        busy, denied = _call(fake.url), _call(fake.url)
    assert busy.status == "http_error" and busy.http_status == 503 and busy.retryable and "busy" in busy.error
    assert denied.http_status == 401 and not denied.retryable and "bad key" in denied.error
    gone = _call(fake.url)  # the server is closed
    assert gone.status == "connection_error" and gone.retryable


def test_served_context_from_props_models_or_none() -> None:
    with FakeLLM(n_ctx=2048, props=True) as fake:
        assert ChatClient(fake.url).served_context() == (2048, "/props n_ctx")
    with FakeLLM(n_ctx=4096, models=True) as fake:
        assert ChatClient(fake.url).served_context() == (4096, "/v1/models max_model_len")
    with FakeLLM() as fake:
        assert ChatClient(fake.url).served_context() is None


@pytest.mark.parametrize(
    "message, context, prompt",
    [
        (
            "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens "
            "(4000 in the messages, 1000 in the completion).",
            2048,
            4000,
        ),
        ("Requested tokens (3100) exceed context window of 2048", 2048, 3100),
        ('the request exceeds the available context size {"n_prompt_tokens": 900, "n_ctx": 512}', 512, 900),
        ("rate limited", None, None),
    ],
)
def test_context_overflow_messages(message, context, prompt) -> None:
    got = context_overflow(message)
    assert (got.context, got.prompt_tokens) == (context, prompt) if context else got is None


def test_bad_base_url_is_named() -> None:
    with pytest.raises(ValueError, match="not an http"):
        ChatClient("localhost:8000")


def test_a_real_llama_cpp_python_stream_is_read_and_its_tokens_counted_by_chunk() -> None:
    """llama-cpp-python 0.3.36 ignores `stream_options` and sends no usage nor llama.cpp's timings (the
    fixture's header says how it was captured); it sends one content chunk per token, so the chunk count
    (not the text's shorter estimate) is the completion's size, still marked estimated."""
    raw = (FIXTURES / "llama_cpp_python_stream.sse").read_bytes()
    chunks = [json.loads(ln[5:]) for ln in raw.splitlines() if ln.startswith(b"data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    with FakeLLM([("raw", raw)]) as fake:
        r = _call(fake.url)
    n_content = sum(1 for c in chunks if c["choices"][0]["delta"].get("content"))
    assert not any("usage" in c or "timings" in c for c in chunks)
    assert r.status == "ok" and r.text == text and r.finish_reason == "length"
    assert r.tokens_estimated and r.tokens_source == "estimated"
    assert r.completion_tokens == n_content > estimate_tokens(text)
    assert r.prompt_tokens == estimate_tokens("".join(m["content"] for m in MSGS))


def test_llama_cpp_timings_count_tokens_when_the_stream_has_no_usage() -> None:
    """llama-server puts `timings` (prompt_n + cache_n, predicted_n) on its last chunk: server counts,
    not estimates, when no usage came; usage wins when both came."""
    with FakeLLM(
        [("reply", "hi " * 30, {"usage": False, "timings": True}), ("reply", "hi " * 30, {"timings": True})]
    ) as fake:
        by_timings, by_usage = _call(fake.url), _call(fake.url)
    prompt = len("be brief" + "write code " * 30) // 3
    assert (by_timings.prompt_tokens, by_timings.completion_tokens) == (prompt, 6)
    assert not by_timings.tokens_estimated and by_timings.tokens_source == "timings"
    assert (by_usage.prompt_tokens, by_usage.completion_tokens, by_usage.tokens_source) == (
        prompt,
        6,
        "usage",
    )
