"""The agent operator against a scripted function-calling server: kegen's tools are offered, the
calls the model makes are run and their results sent back (streamed and not), the step's tool
budget holds, a server without tools is detected once, and whole searches record every call."""

from __future__ import annotations

import json

import pytest

from kegen.report.text import text_report
from kegen.search.config import OperatorConfig
from kegen.search.loop import run_search
from kegen.search.operators.llm.agent import BUDGET_SPENT, AgentOperator
from kegen.search.operators.llm.tools import TOOL_NAMES
from tests.search.agent_fake_server import ToolLLM
from tests.search.test_llm_operator import GOOD, SEED, make_ctx
from tests.search.test_loop import _config


class Recorder:
    """A stand-in for the sandboxed tool worker: records what it was asked, answers like it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, problem: str, code: str, mode: str, target: str, machine: str, timeout_s: float):
        self.calls.append((mode, code))
        out = {"status": "ok", "message": "", "time_s": 1e-5, "stages": {}}
        if mode == "compile":
            out["stages"] = {"softmax_kernel": {"tile": "tile.func @softmax_kernel ...", "ttir": "tt.func"}}
        if mode == "profile":
            out["profile"] = {"target": "mtia", "device": "mtia-2i", "time_s": 1e-5,
                              "launches": [{"kernel": "k", "grid": [16, 1, 1], "time_s": 1e-5, "pes_used": 16,
                                            "pes_total": 64}],
                              "units": [{"name": "DMA", "utilization": 0.5, "stall_cycles": {"dependency": 9.0}}],
                              "stall_shares": {"DMA:dependency": 0.4}}  # fmt: skip
        return out


def _agent(url: str, tool_eval=None, **kw) -> AgentOperator:
    cfg = OperatorConfig(
        name="agent", base_url=url, models=("m",), backoff_base_s=0.01, timeout_s=10.0, max_tokens=512,
        kb_budget_chars=0, **kw,
    )  # fmt: skip
    return AgentOperator(cfg, tool_eval=tool_eval or Recorder(), knowledge=None)


@pytest.mark.parametrize("stream", [True, False])
def test_tools_are_offered_run_and_their_results_sent_back(store, stream: bool) -> None:
    ctx = make_ctx(store)
    rec = Recorder()
    script = [
        ("tools", [("parent", {"what": "code"}), ("profile", {}), ("compile", {"stage": "tile"})]),
        ("tools", [("run", {"code": SEED.replace("32", "64")})]),
        ("reply", GOOD),
    ]
    with ToolLLM(script, stream=stream) as fake:
        p = _agent(fake.url, rec).propose(ctx)
    first, second, third = fake.requests
    assert {t["function"]["name"] for t in first["tools"]} == set(TOOL_NAMES)
    assistant = second["messages"][2]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["parent", "profile", "compile"]
    results = [json.loads(m["content"]) for m in second["messages"][3:]]
    assert [m["tool_call_id"] for m in second["messages"][3:]] == [c["id"] for c in assistant["tool_calls"]]
    assert results[0]["code"] == ctx.parent_code
    assert results[1]["pes"][0]["pes_used"] == 16 and results[1]["units"][0]["name"] == "DMA"
    assert "16 of 64 PEs" in results[1]["rendered"] or "16" in results[1]["rendered"]
    assert results[2]["stage"] == "tile" and results[2]["text"].startswith("tile.func")
    assert [m for m, _ in rec.calls] == ["profile", "compile", "run"] and rec.calls[2][1] != ctx.parent_code
    assert len(third["messages"]) == 3 + 3 + 2  # system, user, 2 x (assistant + results)
    assert p.code is not None and "BLOCK_SIZE = 128" in p.code and p.operator == "agent"
    assert [c.reply_kind for c in p.llm_calls] == ["tool_calls", "tool_calls", "code"]
    assert [t["name"] for t in p.tool_calls] == ["parent", "profile", "compile", "run"]
    assert all(t["status"] == "ok" and t["result"] for t in p.tool_calls)


def test_the_tool_budget_ends_the_calls_and_asks_for_the_code(store) -> None:
    ctx = make_ctx(store)
    with ToolLLM(default=("tools", [("parent", {"what": "diff"})])) as fake:
        p = _agent(fake.url, tool_calls=2).propose(ctx)
    assert len(p.tool_calls) == 2 and "tools" not in fake.requests[-1]
    assert fake.requests[-1]["messages"][-1]["content"] == BUDGET_SPENT
    assert p.code is None and p.meta["reply_kind"] == "no_code"  # it kept calling: no code came


def test_tool_results_are_size_capped(store) -> None:
    ctx = make_ctx(store)
    ctx.parent_code = SEED + "\n# padding\n" * 4000

    with ToolLLM([("tools", [("parent", {"what": "code"})]), ("reply", GOOD)]) as fake:
        p = _agent(fake.url, tool_tokens=400).propose(ctx)
    sent = fake.requests[1]["messages"][-1]["content"]
    assert len(sent) < 400 * 4 and "more characters cut" in sent and p.tool_calls[0]["tokens"] <= 400


def test_a_server_without_tools_is_detected_once(store) -> None:
    ctx = make_ctx(store)
    with ToolLLM(default=("reply", GOOD), tools=False) as fake:
        op = _agent(fake.url)
        first, second = op.propose(ctx), op.propose(ctx)
    assert ["tools" in r for r in fake.requests] == [True, False, False]
    assert first.code is not None and second.code is not None and op.tools_unsupported
    assert "does not take tools" in first.meta["agent_tools"] and not first.tool_calls


def test_bad_arguments_and_unknown_tools_are_answered_not_raised(store) -> None:
    ctx = make_ctx(store)
    script = [("tools", [("compile", {"stage": "ptx"}), ("make_coffee", {})]), ("reply", GOOD)]
    with ToolLLM(script) as fake:
        p = _agent(fake.url).propose(ctx)
    results = [json.loads(m["content"]) for m in fake.requests[1]["messages"][3:]]
    assert "unknown stage" in results[0]["error"] and "unknown tool" in results[1]["error"]
    assert p.code is not None and [t["status"] for t in p.tool_calls] == ["error", "error"]


def test_a_search_with_the_real_sandboxed_profile_tool(tmp_path, store) -> None:
    """kegen's own evaluation runs the tool (a worker process, kegen.eval's sandbox); the result has
    the simulator's PEs, units and stalls; the final answer is evaluated and `kegen report` shows the calls."""
    script = [("tools", [("profile", {})]), ("reply", GOOD)]
    with ToolLLM(script, default=("reply", GOOD.replace("128", "256"))) as fake:
        op = OperatorConfig(name="agent", base_url=fake.url, models=("m",), kb_budget_chars=0, timeout_s=30.0)
        r = run_search(_config(tmp_path, budget=1, operator=op), store)
    node = store.nodes(r.run_id)[1]
    assert node.operator == "agent" and node.verdict == "ok" and r.evaluations == 1
    (art,) = [a for a in store.artifacts(r.run_id) if a["kind"] == "tool_calls"]
    (call,) = json.loads(art["content"])
    result = json.loads(call["result"])
    assert call["name"] == "profile" and result["status"] == "ok", result
    assert result["pes"][0]["pes_total"] == 64 and result["pes"][0]["pes_used"] > 0
    assert {u["name"] for u in result["units"]} >= {"DMA"} and result["stalls"]
    assert "tool profile(" in text_report(store, r.run_id)
    assert "draft" not in {t for t, _ in store.prompts(node.id)}  # a seeded search: no draft prompt


def test_the_reviewer_pass_is_recorded_and_the_child_still_evaluated(tmp_path, store) -> None:
    script = [("reply", GOOD), ("reply", "- assumes COLS is a multiple of 128: no mask on the last block")]
    with ToolLLM(script, default=("reply", "OK")) as fake:
        op = OperatorConfig(name="llm", base_url=fake.url, models=("m",), kb_budget_chars=0, review=True)
        r = run_search(_config(tmp_path, budget=1, operator=op), store)
    assert "You review" not in fake.requests[0]["messages"][0]["content"]  # the proposal, then the review
    assert "You review a Triton candidate" in fake.requests[1]["messages"][0]["content"]
    assert "+NORM_BLOCK_SIZE = 128" in fake.requests[1]["messages"][1]["content"]  # the child's diff
    node = store.nodes(r.run_id)[1]
    kinds = [c["reply_kind"] for c in store.llm_calls(r.run_id)]
    assert kinds == ["code", "review"] and node.verdict == "ok" and r.evaluations == 1
    (meta,) = [a for a in store.artifacts(r.run_id) if a["kind"] == "operator_meta"]
    assert "no mask on the last block" in json.loads(meta["content"])["review"]
