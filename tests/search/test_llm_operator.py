"""The LLM operator against a local OpenAI-compatible server with scripted replies."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kegen.search.config import OperatorConfig
from kegen.search.operators.context import ContextBuilder, ProblemInfo
from kegen.search.operators.extract import extract_code
from kegen.search.operators.llm import LLMOperator, ModelBandit
from kegen.search.policies.base import Selection
from tests.search.search_helpers import EXAMPLES, new_run

SEED = (EXAMPLES / "softmax" / "seed.py").read_text()
GOOD = "Bigger blocks.\n```python\n" + SEED.replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 128") + "```\n"
EDITS = (
    "Online softmax would be better; first a bigger block.\n```\n<<<<<<< SEARCH\nSTATS_BLOCK_SIZE = 32\n=======\n"
    "STATS_BLOCK_SIZE = 256\n>>>>>>> REPLACE\n```\n"
)


class Script:
    """Replies in order: ("ok", text) | ("status", code) | ("sleep", seconds, text) | ("garbage",)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[dict] = []


def _server(script: Script):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, "body": body})
            kind, *rest = script.replies.pop(0) if script.replies else ("ok", "no more")
            if kind == "sleep":
                time.sleep(rest[0])
                kind, rest = "ok", rest[1:]
            if kind == "status":
                payload = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode()
                self.send_response(rest[0])
            elif kind == "garbage":
                payload = b"<html>not json"
                self.send_response(200)
            else:
                payload = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": rest[0]},
                            }
                        ],
                        "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
                    }
                ).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def ctx(store):
    return make_ctx(store)


def make_ctx(store):
    """The context of a child of the softmax seed (optimize phase, no knowledge)."""
    problem = EXAMPLES / "softmax" / "problem.py"
    run = new_run(store, str(problem))
    root = store.add_node(run, parent_id=None, code=SEED, operator="seed")
    store.record_evaluation(root, status="ok", fitness=1.0, profile={"bound": "memory"})
    info = ProblemInfo(path=problem, source=problem.read_text(), op_class="softmax")
    return ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=0)).build(Selection(root))


def _operator(srv, **kw) -> LLMOperator:
    cfg = OperatorConfig(
        name="llm",
        base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1",
        api_key="k",
        models=kw.pop("models", ("model-a",)),
        timeout_s=kw.pop("timeout_s", 5.0),
        max_retries=kw.pop("max_retries", 3),
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        cost_per_1k_input=0.5,
        cost_per_1k_output=1.5,
        **kw,
    )
    return LLMOperator(cfg)


def test_good_reply_whole_file(ctx) -> None:
    script = Script([("ok", GOOD)])
    srv = _server(script)
    try:
        p = _operator(srv).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is not None and "BLOCK_SIZE = 128" in p.code and p.error is None
    (call,) = p.llm_calls
    assert (call.prompt_tokens, call.completion_tokens, call.attempts) == (1000, 200, 1)
    assert abs(call.cost - (1000 * 0.5 + 200 * 1.5) / 1000) < 1e-12
    req = script.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["body"]["model"] == "model-a"
    assert (
        "three-pass" in req["body"]["messages"][1]["content"]
        or "BLOCK_SIZE = 32" in req["body"]["messages"][1]["content"]
    )
    assert p.template == "optimize.tmpl" and "Bigger blocks" in p.description


def test_search_replace_edits(ctx) -> None:
    srv = _server(Script([("ok", EDITS)]))
    try:
        p = _operator(srv).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is not None and "STATS_BLOCK_SIZE = 256" in p.code and "STATS_BLOCK_SIZE = 32" not in p.code
    assert "NORM_BLOCK_SIZE = 32" in p.code
    assert "(edits)" in p.description


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("I would use a bigger block, but here is no code.", "no_code"),
        ("```python\ndef broken(:\n    pass\n```", "invalid_code"),
        ("```\n<<<<<<< SEARCH\nnot in the parent\n=======\nx\n>>>>>>> REPLACE\n```", "invalid_code"),
    ],
)
def test_replies_without_usable_code_are_failed_children(ctx, reply, verdict) -> None:
    srv = _server(Script([("ok", reply)]))
    try:
        p = _operator(srv).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is None and p.verdict == verdict and p.error
    assert p.llm_calls[0].completion_tokens == 200  # the call is still accounted


def test_malformed_http_body_is_recorded_not_raised(ctx) -> None:
    srv = _server(Script([("garbage",)]))
    try:
        p = _operator(srv, max_retries=0).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is None and p.verdict == "no_code" and p.llm_calls[0].status == "error"


def test_rate_limit_and_server_error_are_retried_with_backoff(ctx) -> None:
    script = Script([("status", 429), ("status", 503), ("ok", GOOD)])
    srv = _server(script)
    t0 = time.perf_counter()
    try:
        p = _operator(srv).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is not None and p.llm_calls[0].attempts == 3 and len(script.requests) == 3
    assert time.perf_counter() - t0 < 5


def test_slow_reply_times_out_once_within_the_proposal_deadline(ctx) -> None:
    script = Script([("sleep", 1.5, GOOD), ("ok", GOOD)])
    srv = _server(script)
    t0 = time.perf_counter()
    try:
        p = _operator(srv, timeout_s=0.4).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is None and p.meta["reply_kind"] == "timeout" and p.llm_calls[0].attempts == 1
    assert time.perf_counter() - t0 < 1.2 and p.llm_calls[0].tokens_estimated


def test_retries_give_up_as_a_failed_child(ctx) -> None:
    srv = _server(Script([("status", 429)] * 3))
    try:
        p = _operator(srv, max_retries=2).propose(ctx)
    finally:
        srv.shutdown()
    assert p.code is None and p.llm_calls[0].attempts == 3 and "HTTP 429" in (p.error or "")


def test_bandit_prefers_the_model_that_pays_off() -> None:
    import random

    b = ModelBandit(("a", "b"), random.Random(0))
    for _ in range(40):
        m = b.choose()
        b.update(m, 1.0 if m == "b" else 0.0)
    assert b.arms["b"].pulls > 3 * b.arms["a"].pulls


def test_extract_prefers_the_full_module() -> None:
    reply = "```python\nx = 1\n```\n```python\n" + SEED + "```"
    assert extract_code(reply, "").code.strip() == SEED.strip()
