"""Whole searches with the LLM operator against the streaming fake server: proposals overlap,
calls end with the search, the fallback keeps the search going, and the summary and report show
every reply kind with its prompt and reply."""

from __future__ import annotations

import argparse
import time

import pytest

from kegen.commands.evolve import add_arguments, build_config
from kegen.report import write_report
from kegen.report.llm import llm_stats, llm_summary
from kegen.report.text import text_report
from kegen.search.config import OperatorConfig, TerminationConfig
from kegen.search.loop import run_search
from tests.search.llm_fake_server import FakeLLM
from tests.search.test_llm_operator import GOOD
from tests.search.test_loop import _config


def _llm(url: str, **kw) -> OperatorConfig:
    return OperatorConfig(
        name="llm", base_url=url, models=("m",), backoff_base_s=0.01, kb_budget_chars=0, **kw
    )


def _good(block: int) -> str:
    return GOOD.replace("BLOCK_SIZE = 128", f"BLOCK_SIZE = {block}")


def test_proposals_run_in_parallel_with_each_other(tmp_path, store) -> None:
    script = [("reply", _good(b), {"wait": 0.6}) for b in (64, 128, 256, 512)]
    with FakeLLM(script) as fake:
        r = run_search(_config(tmp_path, budget=4, operator=_llm(fake.url, parallel=2)), store)
    span = max(e for _, e in fake.spans) - min(s for s, _ in fake.spans)
    assert fake.max_active == 2 and span < 4 * 0.6  # one at a time, the calls alone take 2.4 s
    assert r.evaluations == 4 and r.best is not None and r.best.fitness > 1.0
    assert all(n.evaluated for n in store.nodes(r.run_id))


def test_no_call_outlives_the_search(tmp_path, store) -> None:
    with FakeLLM(default=("hang", 60.0)) as fake:
        t0 = time.monotonic()
        term = TerminationConfig(max_evaluations=50, time_limit_s=4.0)
        r = run_search(
            _config(
                tmp_path, budget=50, termination=term, operator=_llm(fake.url, parallel=2, timeout_s=60.0)
            ),
            store,
        )
        wall = time.monotonic() - t0
        deadline = time.monotonic() + 3
        while fake.active and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.active == 0, "the server is still generating for the finished search"
    assert wall < 6.0 and r.stop_reason.startswith("time limit")
    calls = store.llm_calls(r.run_id)
    assert calls and all(c["tokens_estimated"] and c["completion_tokens"] > 0 for c in calls)
    assert {c["reply_kind"] for c in calls} <= {"timeout", "cancelled"}


def test_fallback_to_offline_keeps_the_search_going(tmp_path, store) -> None:
    with FakeLLM(default=("reply", "I cannot help with that.")) as fake:
        r = run_search(_config(tmp_path, budget=6, operator=_llm(fake.url, fallback_after=2)), store)
    nodes = store.nodes(r.run_id)[1:]
    assert r.evaluations == 6 and [n.operator for n in nodes[:2]] == ["llm", "llm"]
    assert all(n.operator == "offline" for n in nodes[2:]) and r.best is not None and r.best.fitness > 1.0
    stats = llm_stats(store, r.run_id)
    assert stats["calls"] == 2 and stats["fallback"]["node"] == nodes[1].id
    assert "fallback to the offline operator" in (llm_summary(store, r.run_id) or "")


def test_summary_and_report_show_reply_kinds_prompts_and_replies(tmp_path, store) -> None:
    script = [
        ("echo",),
        ("length", "Bigger blocks:\n```python\nimport torch\n"),
        ("status", 400, "unsupported parameter"),
        ("reply", _good(256)),
    ]
    with FakeLLM(script) as fake:  # replies without code are free: one evaluation takes four calls
        r = run_search(
            _config(tmp_path, budget=1, operator=_llm(fake.url, max_retries=0, fallback_after=0)), store
        )
    assert r.evaluations == 1 and len(fake.requests) == 4
    summary = llm_summary(store, r.run_id) or ""
    for kind in ("echo 1", "truncated 1", "code 1", "http_error 1"):
        assert kind in summary
    assert "latency median" in summary and "tokens" in summary
    text = text_report(store, r.run_id)
    assert (
        "reply truncated, finish length" in text and "failure: the reply was cut at the token limit" in text
    )
    assert "prompt (optimize.tmpl" in text and "unsupported parameter" in text and "reply echo" in text
    page = write_report(store, r.run_id, tmp_path / "report").read_text()
    assert page.count("<details>") == 4 and "unsupported parameter" in page and "&lt;&lt;&lt;&lt;" in page


def test_evolve_llm_flags(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KEGEN_HOME", str(tmp_path))
    monkeypatch.setenv("KEGEN_LLM_CONTEXT", "8192")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["p.py", "--operator", "llm", "--llm-max-tokens", "700", "--llm-timeout", "45", "--llm-fallback", "3",
         "--llm-parallel", "2", "--llm-retries", "1"]
    )  # fmt: skip
    op = build_config(args).operator
    assert (op.context_tokens, op.max_tokens, op.timeout_s, op.fallback_after, op.parallel, op.max_retries) == (
        8192, 700, 45.0, 3, 2, 1,
    )  # fmt: skip
    args = parser.parse_args(["p.py", "--operator", "llm", "--llm-context", "2048"])
    assert build_config(args).operator.context_tokens == 2048


def test_offline_searches_stay_reproducible(tmp_path, store) -> None:
    """The offline operator writes children inline (no proposal threads): same seed, same tree."""
    runs = [run_search(_config(tmp_path / str(i), budget=5), store) for i in range(2)]
    trees = [[(n.parent_id is None, n.description, n.code_hash) for n in store.nodes(r.run_id)] for r in runs]
    assert trees[0] == trees[1] and len(trees[0]) == 6


@pytest.mark.slow
def test_evaluations_are_recorded_while_a_proposal_is_still_in_flight(tmp_path, store) -> None:
    """An evaluation in a worker process is recorded as it finishes, not when the next proposal ends."""
    script = [("reply", _good(256)), ("reply", _good(512), {"wait": 8.0})]
    with FakeLLM(script) as fake:
        r = run_search(_config(tmp_path, budget=2, jobs=2, operator=_llm(fake.url, parallel=2)), store)
    first = store.nodes(r.run_id)[1]
    slow_end = max(e for _, e in fake.spans)
    assert first.verdict == "ok" and first.evaluated_at is not None
    # evaluated_at is wall-clock time; the spans are monotonic: compare through the run's own clock
    assert time.time() - first.evaluated_at > time.monotonic() - slow_end + 1.0


def test_the_fallback_is_restored_on_resume(tmp_path, store) -> None:
    """A resumed run does not ask the model that failed again; its streak of unusable replies carries over,
    and another endpoint is asked afresh."""
    with FakeLLM(default=("reply", "I cannot help with that.")) as fake:
        op = _llm(fake.url, fallback_after=2)
        one_call = TerminationConfig(max_evaluations=1, max_tokens=1)  # stops after one (free) reply
        first = run_search(_config(tmp_path, operator=op, termination=one_call), store)
        assert len(fake.requests) == 1 and first.evaluations == 0
        resumed = run_search(_config(tmp_path, budget=3, operator=op, resume=first.run_id), store)
        assert len(fake.requests) == 2  # the streak carried over: the second reply made it fall back
        again = run_search(_config(tmp_path, budget=5, operator=op, resume=first.run_id), store)
        assert len(fake.requests) == 2, "the resumed run asked the failing model again"
    assert resumed.run_id == again.run_id == first.run_id and again.evaluations == 5
    ops = [n.operator for n in store.nodes(first.run_id)[1:]]
    assert ops == ["llm", "llm", "offline", "offline", "offline", "offline", "offline"]
    with FakeLLM(default=("reply", "Still no code.")) as other:
        run_search(
            _config(tmp_path, budget=6, operator=_llm(other.url, fallback_after=2), resume=first.run_id),
            store,
        )
    # asked afresh: one more unusable reply (free), then the offline operator writes the sixth
    assert len(other.requests) == 1 and [n.operator for n in store.nodes(first.run_id)[8:]] == ["llm", "offline"]
