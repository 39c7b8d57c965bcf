"""The LLM's budgets: replies without code cost no evaluation (the same simulated candidates as the
offline operator at the same --budget), a limit on LLM proposals, a seeded search never sends the
draft prompt, and reply budgets, deadlines and token estimates fit a local server."""

from __future__ import annotations

import argparse

import pytest

from kegen.commands.evolve import add_arguments, build_config
from kegen.search.config import OperatorConfig, PolicyConfig
from kegen.search.loop import run_search
from kegen.search.operators.llm import LLMOperator
from kegen.search.operators.llm.client import ChatClient
from kegen.search.operators.llm.sizing import LOCAL_CONTEXT, REMOTE_TIMEOUT_S, Sizer, Speed
from tests.search.agent_fake_server import ToolLLM
from tests.search.llm_fake_server import FakeLLM
from tests.search.test_llm_operator import GOOD
from tests.search.test_loop import _config


def _llm(url: str, **kw) -> OperatorConfig:
    return OperatorConfig(
        name="llm", base_url=url, models=("m",), backoff_base_s=0.01, kb_budget_chars=0, **kw
    )


def _simulated(log) -> int:
    return sum(1 for line in log.read_text().splitlines() if line.startswith("start"))


def test_the_same_budget_simulates_the_same_number_of_candidates(tmp_path, store, monkeypatch) -> None:
    runs = {}
    for name in ("offline", "llm"):
        log = tmp_path / f"{name}.log"
        monkeypatch.setenv("KEGEN_FAKE_EVAL_LOG", str(log))
        script = []
        for block in (64, 128, 256, 512):  # a reply without code before each of four candidates
            script += [("reply", "I would use bigger blocks."), ("reply", GOOD.replace("= 128", f"= {block}"))]
        with FakeLLM(script, default=("reply", "no idea")) as fake:
            op = _llm(fake.url, fallback_after=0) if name == "llm" else OperatorConfig(kb_budget_chars=0)
            r = run_search(_config(tmp_path / name, budget=4, operator=op), store)
        runs[name] = (r.evaluations, _simulated(log) - 1)  # the seed's own evaluation is not a child
        if name == "llm":
            calls = store.llm_calls(r.run_id)
            assert len(calls) == 8 and sum(c["reply_kind"] == "no_code" for c in calls) == 4
    assert runs["offline"] == runs["llm"] == (4, 4)


def test_the_llm_call_limit_hands_over_to_the_offline_operator(tmp_path, store) -> None:
    with FakeLLM(default=("reply", "no code, ever")) as fake:
        r = run_search(
            _config(tmp_path, budget=3, operator=_llm(fake.url, fallback_after=0, max_calls=2)), store
        )
    assert len(fake.requests) == 2 and r.evaluations == 3
    ops = [n.operator for n in store.nodes(r.run_id)[1:]]
    assert ops == ["llm", "llm", "offline", "offline", "offline"]
    assert any(
        a["kind"] == "llm_fallback" and "limit of 2" in a["content"] for a in store.artifacts(r.run_id)
    )


def test_a_seeded_search_never_sends_the_draft_prompt(tmp_path, store) -> None:
    with FakeLLM(default=("reply", GOOD)) as fake:
        config = _config(tmp_path, budget=4, operator=_llm(fake.url))
        assert config.seed is not None and PolicyConfig().draft_children == 3  # a draft phase happens
        run_search(config, store)
    users = [r["messages"][1]["content"] for r in fake.requests]
    assert len(users) >= 4 and not any("write a first Triton candidate" in u for u in users)


def test_estimated_tokens_of_a_cut_reply_are_the_reply_budget() -> None:
    with FakeLLM([("length", "word " * 400, {"usage": False})]) as fake:
        client = ChatClient(fake.url)
        import time

        r = client.complete("m", [{"role": "user", "content": "hi"}], max_tokens=64, temperature=0.0,
                            deadline=time.monotonic() + 5)  # fmt: skip
    assert r.finish_reason == "length" and r.tokens_estimated and r.completion_tokens == 64


def test_a_local_server_that_does_not_say_its_window() -> None:
    with FakeLLM() as fake:  # /props answers 404, /v1/models has no length (llama-cpp-python)
        op = LLMOperator(_llm(fake.url))
        prompt, reply = op.budgets()
    assert op.context == LOCAL_CONTEXT and "assumed" in op.context_source and reply == LOCAL_CONTEXT // 4
    assert prompt < LOCAL_CONTEXT - reply
    with ToolLLM(slots=2048) as fake:  # llama-server's /slots says it
        op = LLMOperator(_llm(fake.url))
        _, reply = op.budgets()
    assert (op.context, op.context_source, reply) == (2048, "/slots n_ctx", 512)


def test_deadlines_follow_the_measured_speed() -> None:
    remote, local = Sizer(0, 0.0, local=False), Sizer(0, 0.0, local=True)
    assert remote.timeout_s(3000, 1024) == REMOTE_TIMEOUT_S
    first = local.timeout_s(3000, 1024)  # before any measurement: a slow local server is assumed
    assert first > 3000 / 78 + 1024 / 49  # the speeds measured here (notes/local-llm.md) fit in it
    local.observe(Speed(prompt_tps=80.0, generation_tps=5.0))
    assert local.timeout_s(3000, 1024) == pytest.approx(1.5 * (3000 / 80 + 1024 / 5) + 5)
    assert local.reply_tokens(8192) == min(2048, int(5.0 * 240))  # shrunk to what it writes in 4 minutes
    assert local.prompt_tokens(12000, 512) == 80 * 90  # a prompt it reads in 90 s
    assert Sizer(700, 45.0, local=True).timeout_s(3000, 1024) == 45.0
    assert Sizer(700, 45.0, local=True).reply_tokens(1024) == 512  # explicit: at most half the window


def test_flag_names_and_their_deprecated_aliases(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KEGEN_HOME", str(tmp_path))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    new = build_config(parser.parse_args(["p.py", "--token-limit", "9000", "--llm-reply-tokens", "300"]))
    assert (new.termination.max_tokens, new.operator.max_tokens) == (9000, 300)
    assert capsys.readouterr().err == ""
    old = build_config(parser.parse_args(["p.py", "--max-tokens", "9000", "--llm-max-tokens", "300"]))
    assert (old.termination.max_tokens, old.operator.max_tokens) == (9000, 300)
    err = capsys.readouterr().err
    assert (
        "--max-tokens is deprecated" in err and "use --token-limit" in err and "use --llm-reply-tokens" in err
    )
    plain = build_config(parser.parse_args(["p.py", "--budget", "5"]))
    assert (
        plain.operator.max_calls == 15 and plain.operator.max_tokens == 0 and plain.operator.timeout_s == 0.0
    )


def test_hardware_notes_take_at_most_a_quarter_of_the_prompt(store) -> None:
    from kegen.search.operators.budget import estimate_tokens
    from kegen.search.operators.llm.prompt import build_prompt
    from tests.search.test_llm_operator import make_ctx

    ctx = make_ctx(store)
    ctx.knowledge = [(f"notes {i}", f"fact {i} " * 150) for i in range(6)]  # the bottleneck's first
    for budget in (3000, 12000):
        _, system, user, fitted = build_prompt(ctx, budget)
        share = estimate_tokens(fitted.texts["knowledge"]) / (estimate_tokens(system) + estimate_tokens(user))
        assert 0.0 < share <= 0.25 and "### notes 0" in user and "### notes 5" not in user
    *_, everything = build_prompt(ctx, 12000, knowledge_share=1.0)
    assert "### notes 5" in everything.texts["knowledge"]
