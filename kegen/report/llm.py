"""The LLM's part of a run: calls by reply kind, tokens, latencies, the fallback, and per node the
failure message, prompt, reply, finish reason, tokens and latency, and the agent's tool calls with
their results (text and HTML)."""

from __future__ import annotations

import html
import json
import statistics
from typing import Any

from kegen.search.store import GraphStore, Node

TEXT_LINES = 12  # lines of a prompt or reply shown in the text report (the HTML shows all)


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def llm_stats(store: GraphStore, run_id: str) -> dict[str, Any]:
    """Calls, reply kinds, tokens (and how many calls were estimated), latency median/p90, fallback."""
    calls = store.llm_calls(run_id)
    lat = [float(c["latency_s"]) for c in calls]
    fallback = [a for a in store.artifacts(run_id) if a["kind"] == "llm_fallback"]
    return {
        "calls": len(calls),
        "kinds": store.reply_kinds(run_id) if calls else {},
        "prompt_tokens": sum(int(c["prompt_tokens"]) for c in calls),
        "completion_tokens": sum(int(c["completion_tokens"]) for c in calls),
        "estimated_calls": sum(1 for c in calls if c["tokens_estimated"]),
        "abandoned_calls": sum(1 for c in calls if c["node_id"] is None),
        "latency_median_s": statistics.median(lat) if lat else None,
        "latency_p90_s": _quantile(lat, 0.9) if lat else None,
        "cost": sum(float(c["cost"]) for c in calls),
        "fallback": {"node": fallback[0]["node_id"], "reason": fallback[0]["content"]} if fallback else None,
    }


def llm_summary(store: GraphStore, run_id: str) -> str | None:
    """A few lines on the LLM's calls for the search summary; None when the run made none."""
    s = llm_stats(store, run_id)
    if not s["calls"]:
        return None
    kinds = ", ".join(f"{k} {n}" for k, n in s["kinds"].items())
    tokens = s["prompt_tokens"] + s["completion_tokens"]
    lines = [
        f"LLM: {s['calls']} calls — replies: {kinds}",
        f"  tokens {tokens} ({s['prompt_tokens']} prompt + {s['completion_tokens']} reply"
        + (
            f"; {s['estimated_calls']} calls estimated, the server sent no usage"
            if s["estimated_calls"]
            else ""
        )
        + f"), cost {s['cost']:.4f}; latency median {s['latency_median_s']:.1f} s,"
        f" p90 {s['latency_p90_s']:.1f} s",
    ]
    if tools := [t for calls in tool_calls(store, run_id).values() for t in calls]:
        names: dict[str, int] = {}
        for t in tools:
            names[str(t.get("name"))] = names.get(str(t.get("name")), 0) + 1
        by_name = ", ".join(f"{k} {n}" for k, n in sorted(names.items()))
        lines.append(f"  tool calls: {len(tools)} ({by_name}); per node in kegen report")
    if s["abandoned_calls"]:
        lines.append(f"  {s['abandoned_calls']} calls abandoned when the search stopped (tokens counted)")
    if s["fallback"]:
        lines.append(
            f"  fallback to the offline operator at node {s['fallback']['node']}: {s['fallback']['reason']}"
        )
    return "\n".join(lines)


def _head(text: str, n: int = TEXT_LINES) -> str:
    lines = text.splitlines()
    more = f"\n      [... {len(lines) - n} more lines]" if len(lines) > n else ""
    return "\n".join("      " + line for line in lines[:n]) + more


def _call_line(c: dict[str, Any]) -> str:
    est = " (estimated)" if c["tokens_estimated"] else ""
    return (
        f"call: model {c['model']}, reply {c['reply_kind'] or 'unknown'}, finish {c['finish_reason'] or '-'},"
        f" tokens {c['prompt_tokens']}+{c['completion_tokens']}{est}, latency {c['latency_s']:.1f} s,"
        f" {c['attempts']} attempt{'s' if c['attempts'] != 1 else ''}"
    )


def tool_calls(store: GraphStore, run_id: str) -> dict[int, list[dict[str, Any]]]:
    """The agent's tool calls per node (the `tool_calls` artifacts)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for art in store.artifacts(run_id):
        if art["kind"] == "tool_calls" and art["node_id"] is not None:
            try:
                out.setdefault(int(art["node_id"]), []).extend(json.loads(art["content"] or "[]"))
            except ValueError:
                continue
    return out


def _tool_line(t: dict[str, Any]) -> str:
    return (
        f"tool {t.get('name')}({str(t.get('arguments') or '')[:80]}) -> {t.get('status')},"
        f" {t.get('tokens', 0)} tokens, {float(t.get('wall_s') or 0):.1f} s"
    )


def _failure(store: GraphStore, n: Node) -> str | None:
    if n.correct or not n.evaluated:
        return None
    ev = store.evaluation(n.id)
    return (ev.message if ev else None) or n.verdict


def llm_nodes_text(store: GraphStore, run_id: str) -> str:
    """Per node written by the LLM: verdict, failure message, the call, the prompt's and reply's head."""
    by_node: dict[int, list[dict[str, Any]]] = {}
    for c in store.llm_calls(run_id):
        if c["node_id"] is not None:
            by_node.setdefault(int(c["node_id"]), []).append(c)
    tools = tool_calls(store, run_id)
    out: list[str] = []
    for node_id, calls in by_node.items():
        n = store.node(node_id)
        out.append(f"node {n.id} ({n.verdict or n.status}): {n.description}")
        if (msg := _failure(store, n)) is not None:
            out.append(f"  failure: {msg.strip().splitlines()[0] if msg.strip() else msg}")
        for c in calls:
            out.append("  " + _call_line(c))
            if c["error"]:
                out.append(f"  error: {c['error']}")
        for t in tools.get(node_id, []):
            out += ["  " + _tool_line(t), _head(str(t.get("result") or ""), 4)]
        for template, text in store.prompts(n.id):
            out += [f"    prompt ({template}, {len(text)} chars):", _head(text)]
        for c in calls:
            out += [f"    reply ({len(c['reply'] or '')} chars):", _head(c["reply"] or "(none)")]
    return "\n".join(out) if out else "(no LLM calls)"


def llm_html(store: GraphStore, run_id: str) -> str:
    """The LLM section of the HTML report: the summary and one collapsible block per node."""
    summary = llm_summary(store, run_id)
    if summary is None:
        return "<p>(no LLM calls)</p>"
    parts = [f"<pre>{html.escape(summary)}</pre>"]
    by_node: dict[int, list[dict[str, Any]]] = {}
    for c in store.llm_calls(run_id):
        if c["node_id"] is not None:
            by_node.setdefault(int(c["node_id"]), []).append(c)
    tools = tool_calls(store, run_id)
    for node_id, calls in by_node.items():
        n = store.node(node_id)
        kinds = ", ".join(str(c["reply_kind"]) for c in calls)
        body = []
        if (msg := _failure(store, n)) is not None:
            body.append(f"<p><b>failure:</b> {html.escape(msg)}</p>")
        for c in calls:
            body.append(f"<p>{html.escape(_call_line(c))}</p>")
            if c["error"]:
                body.append(f"<p><b>error:</b> {html.escape(c['error'])}</p>")
        for t in tools.get(node_id, []):
            result = html.escape(str(t.get("result") or ""))
            body.append(f"<p><b>{html.escape(_tool_line(t))}</b></p><pre>{result}</pre>")
        for template, text in store.prompts(n.id):
            body.append(f"<p><b>prompt</b> ({html.escape(template)})</p><pre>{html.escape(text)}</pre>")
        for c in calls:
            body.append(f"<p><b>reply</b></p><pre>{html.escape(c['reply'] or '(none)')}</pre>")
        parts.append(
            f"<details><summary>node {n.id} — {html.escape(n.verdict or n.status)} — {html.escape(kinds)}"
            f" — {html.escape(n.description)}</summary>{''.join(body)}</details>"
        )
    return "\n".join(parts)
