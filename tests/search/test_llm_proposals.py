"""The LLM operator against the streaming fake server: reply kinds, the served window, bounded
retries, and the fallback to the offline operator."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from kegen.search.config import OperatorConfig
from kegen.search.operators import Proposal
from kegen.search.operators.extract import extract_code
from kegen.search.operators.llm import LLMOperator
from kegen.search.operators.llm.prompt import read_template
from tests.search.llm_fake_server import FakeLLM
from tests.search.test_llm_operator import EDITS, GOOD, SEED, make_ctx


@pytest.fixture
def ctx(store):
    return make_ctx(store)


def _op(url: str, **kw) -> LLMOperator:
    cfg = OperatorConfig(
        name="llm",
        base_url=url,
        models=kw.pop("models", ("m",)),
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        timeout_s=kw.pop("timeout_s", 5.0),
        max_tokens=kw.pop("max_tokens", 512),
        kb_budget_chars=0,
        **kw,
    )
    return LLMOperator(cfg)


def test_echo_of_the_prompt_is_never_an_edit(ctx) -> None:
    with FakeLLM([("echo",)]) as fake:
        p = _op(fake.url).propose(ctx)
    assert p.code is None and p.meta["reply_kind"] == "echo" and p.verdict == "no_code"
    assert p.llm_calls[0].reply_kind == "echo" and "repeats" in (p.error or "")


def test_the_instructions_example_edit_is_not_applied() -> None:
    system = read_template("system.md")
    example = system[system.index("<<<<<<<") : system.index("REPLACE") + len("REPLACE")]
    parent = "exact lines of the parent\nclass ModelNew:\n    pass\n"  # the example would even apply
    got = extract_code(f"Sure.\n```\n{example}\n```", parent, system)
    assert got.code is None and got.kind == "echo"
    real = extract_code(EDITS, SEED, system)  # a real edit beside the prompt is taken
    assert real.code is not None and "STATS_BLOCK_SIZE = 256" in real.code


def test_parent_code_copied_unchanged_is_an_echo(ctx) -> None:
    with FakeLLM([("reply", f"Here it is.\n```python\n{SEED}```\n")]) as fake:
        p = _op(fake.url).propose(ctx)
    assert p.code is None and p.meta["reply_kind"] == "echo"


@pytest.mark.parametrize(
    "step, kind, verdict",
    [
        (
            ("length", "I will raise the block size:\n```python\nimport torch\nclass ModelNew("),
            "truncated",
            "no_code",
        ),
        (("reply", "I would use a bigger block."), "no_code", "no_code"),
        (("reply", "Here:\n```python\nimport torch\n", {"finish": None}), "truncated", "no_code"),
        (("reply", "```python\ndef broken(:\n```"), "malformed", "invalid_code"),
        (("reply", ""), "empty", "no_code"),
        (("status", 500, "boom"), "http_error", "no_code"),
    ],
)
def test_reply_kinds_are_recorded(ctx, step, kind, verdict) -> None:
    with FakeLLM([step], default=step) as fake:
        p = _op(fake.url, max_retries=0).propose(ctx)
    call = p.llm_calls[0]
    assert p.code is None and p.verdict == verdict and call.reply_kind == kind and p.error
    if step[0] == "length":
        assert call.finish_reason == "length" and "token limit (512 tokens)" in p.error


def test_good_reply_records_finish_reason_and_server_usage(ctx) -> None:
    with FakeLLM([("reply", GOOD)]) as fake:
        p = _op(fake.url).propose(ctx)
    call = p.llm_calls[0]
    assert p.code is not None and call.reply_kind == "code" and call.finish_reason == "stop"
    assert call.completion_tokens > 0 and call.prompt_tokens > 0 and not call.tokens_estimated


def test_prompt_fits_the_served_window_and_refits_after_an_overflow(ctx) -> None:
    big = replace(ctx, knowledge=[(f"doc {i}", "word " * 400) for i in range(4)])
    with FakeLLM([("reply", GOOD)], n_ctx=3000, props=True) as fake:
        op = _op(fake.url)
        op.knowledge_share = 1.0  # every document may fill the prompt: it overflows the window
        p = op.propose(big)
        sizes = [len("".join(m["content"] for m in r["messages"])) for r in fake.requests]
    assert p.code is not None and p.llm_calls[0].attempts == 2
    assert fake.requests[0]["max_tokens"] == 512 and len(sizes) == 2 and sizes[1] < sizes[0]
    assert op.context == 3000 and op.token_scale > 1.0
    assert sizes[1] // 3 + 512 <= 3000  # the refitted prompt fits by the server's count


def test_reply_budget_is_half_a_small_window(ctx) -> None:
    with FakeLLM([("reply", GOOD)], n_ctx=4096, models=True) as fake:
        op = _op(fake.url, max_tokens=4096)
        op.propose(ctx)
    assert fake.requests[0]["max_tokens"] == 2048 and op.context_source == "/v1/models max_model_len"


def test_a_prompt_that_cannot_fit_names_the_fix(ctx) -> None:
    with FakeLLM(n_ctx=1200, props=True) as fake:
        p = _op(fake.url).propose(ctx)
    assert p.code is None and p.meta["reply_kind"] == "context_overflow" and len(fake.requests) == 2
    assert "maximum context length is 1200" in p.error and "serve a larger context" in p.error


def test_retries_are_bounded_by_the_proposal_deadline(ctx) -> None:
    with FakeLLM(default=("status", 503, "overloaded")) as fake:
        op = _op(fake.url, timeout_s=0.8, max_retries=50)
        op.config = replace(op.config, backoff_base_s=0.2, backoff_max_s=0.2)
        t0 = time.monotonic()
        p = op.propose(ctx)
    assert time.monotonic() - t0 < 1.3 and p.llm_calls[0].reply_kind == "http_error"
    assert 2 <= p.llm_calls[0].attempts <= 5


def test_the_search_deadline_caps_a_call(ctx) -> None:
    with FakeLLM([("hang", 30.0)]) as fake:
        op = _op(fake.url, timeout_s=60.0)
        op.set_deadline(time.monotonic() + 1.6)  # the call must end 1 s before the search does
        t0 = time.monotonic()
        p = op.propose(ctx)
    assert time.monotonic() - t0 < 1.2 and p.llm_calls[0].reply_kind == "timeout"


def test_fallback_after_k_unusable_replies(ctx) -> None:
    with FakeLLM(default=("reply", "no idea")) as fake:
        op = _op(fake.url, fallback_after=2)
        kinds = [op.propose(ctx) for _ in range(3)]
    assert [p.operator for p in kinds] == ["llm", "llm", "offline"]
    assert "2 unusable LLM replies in a row" in kinds[1].meta["llm_fallback"]
    assert kinds[2].meta.get("fallback") and kinds[2].description.startswith("[offline fallback]")
    assert len(fake.requests) == 2 and kinds[2].code is not None


def test_unreachable_endpoint_falls_back_at_once(ctx) -> None:
    fake = FakeLLM()
    url = fake.url
    fake.srv.server_close()  # nothing listens on the port
    op = _op(url, max_retries=1)
    first, second = op.propose(ctx), op.propose(ctx)
    assert first.meta["reply_kind"] == "unreachable" and "unreachable" in first.meta["llm_fallback"]
    assert second.operator == "offline"


def test_a_codeless_reply_made_of_prompt_lines_is_an_echo() -> None:
    from kegen.search.operators.llm.client import ChatResult
    from kegen.search.operators.llm.replies import read_reply

    system = read_template("system.md")
    copied = "\n".join(line for line in system.splitlines() if "```" not in line and "<<<" not in line)
    echo = read_reply(ChatResult("ok", text=copied, finish_reason="stop"), system, SEED, 100)
    own = read_reply(
        ChatResult("ok", text="I think a bigger block would help here.", finish_reason="stop"),
        system,
        SEED,
        100,
    )
    assert (echo.kind, echo.verdict) == ("echo", "no_code") and own.kind == "no_code"


def test_restore_takes_the_fallback_back_only_for_what_failed() -> None:
    meta = {"model": "m", "reply_kind": "no_code", "llm_fallback": "2 unusable LLM replies in a row",
            "llm_endpoint": "http://llm.example.test/v1", "llm_models": ["m"]}  # fmt: skip
    failed = Proposal(None, "m: no_code", "llm", meta=meta)

    def restored(url: str, **kw) -> LLMOperator:
        op = _op(url, **kw)
        op.restore(Proposal(None, "m: no_code", "llm", meta={"model": "m", "reply_kind": "no_code"}))
        op.restore(failed)
        return op

    same = restored("http://llm.example.test/v1/")
    assert same.fallback_reason and "earlier session" in same.fallback_reason and same.unusable_in_a_row == 2
    assert restored("http://other.example.test/v1").fallback_reason is None
    assert restored("http://llm.example.test/v1", models=("m", "n")).fallback_reason is None
    assert restored("http://llm.example.test/v1", fallback_after=0).fallback_reason is None
    streak = _op("http://llm.example.test/v1")
    for kind in ("no_code", "code", "truncated", "cancelled"):
        streak.restore(Proposal(None, "", "llm", meta={"model": "m", "reply_kind": kind}))
    assert streak.unusable_in_a_row == 1 and streak.fallback_reason is None
