"""The LLM operator: one streamed chat completion per child from any OpenAI-compatible endpoint.

A proposal has one deadline (`OperatorConfig.timeout_s`, else sized from the prompt, the reply
budget and the server's measured speed: `sizing`; never past the search's end): fast failures (429,
5xx, a dropped connection) are retried with backoff inside it, a timeout is not (the deadline is
spent). The prompt is fitted to the served context window (configured, else read from the server,
else assumed for a local server) minus the reply budget; a 400 naming the window teaches the
operator the real size and the prompt is fitted again once. With a correct parent the prompt asks
for edits of it, also in the draft phase (`prompt.template_name`). At most `max_calls` proposals ask
the LLM; then, as after the fallback, the offline operator writes the remaining children.
Every outcome is read by `replies.read_reply` and recorded
with the call (finish reason, reply kind, tokens, estimated or not). After `fallback_after`
unusable replies in a row, or an unreachable endpoint, the offline operator writes the remaining
children (recorded in the proposals' meta with the endpoint and models that failed; `restore` brings
the streak and the fallback back on `--resume` while they are unchanged). Proposals may run in
several threads at once.
Several models may be configured: a UCB1 bandit picks one per step, rewarded by the child's gain.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from kegen.search.config import OperatorConfig
from kegen.search.operators.base import LLMCallRecord, Operator, Proposal
from kegen.search.operators.budget import estimate_tokens
from kegen.search.operators.context import OperatorContext
from kegen.search.operators.llm.client import ChatClient, ChatResult, context_overflow
from kegen.search.operators.llm.prompt import KNOWLEDGE_SHARE, render_prompt
from kegen.search.operators.llm.proxy import is_loopback
from kegen.search.operators.llm.replies import USABLE, Reading, read_reply
from kegen.search.operators.llm.sizing import LOCAL_CONTEXT, Sizer, measure

CHAT_OVERHEAD_TOKENS = 64  # the chat template's role markers around system and user messages
MIN_PROMPT_TOKENS = 512
SEARCH_END_MARGIN_S = 1.0  # a call ends this long before the search's end


class LLMUnavailable(RuntimeError):
    """The endpoint is not configured."""


@dataclass
class ModelArm:
    name: str
    pulls: int = 0
    reward: float = 0.0


class ModelBandit:
    """UCB1 over the configured models; reward 1 when a child beat its parent, else 0."""

    def __init__(self, models: tuple[str, ...], rng: random.Random) -> None:
        if not models:
            raise ValueError("no LLM model configured: set KEGEN_LLM_MODELS or pass --model")
        self.arms = {m: ModelArm(m) for m in models}
        self.rng = rng

    def choose(self) -> str:
        untried = [a.name for a in self.arms.values() if a.pulls == 0]
        if untried:
            return untried[0]
        total = sum(a.pulls for a in self.arms.values())
        return max(
            self.arms.values(), key=lambda a: a.reward / a.pulls + math.sqrt(2 * math.log(total) / a.pulls)
        ).name

    def update(self, model: str, reward: float) -> None:
        arm = self.arms.get(model)
        if arm is not None:
            arm.pulls += 1
            arm.reward += reward


class LLMOperator(Operator):
    """Writes children with an OpenAI-compatible chat model; falls back to offline mutations."""

    name = "llm"
    concurrent = True
    knowledge_share = KNOWLEDGE_SHARE  # of the prompt's budget for hardware notes, at most

    def __init__(self, config: OperatorConfig, seed: int = 0, client: ChatClient | None = None) -> None:
        if not config.base_url and client is None:
            raise LLMUnavailable(
                "the LLM operator needs an endpoint: set KEGEN_LLM_BASE_URL (and KEGEN_LLM_API_KEY),"
                " or use --operator offline"
            )
        self.config = config
        self.seed = seed
        self.bandit = ModelBandit(tuple(config.models), random.Random(seed))
        self.client = client or ChatClient(config.base_url, config.api_key)
        self.search_deadline: float | None = None
        self.context: int | None = config.context_tokens or None
        self.context_source = "configured" if self.context else "unknown"
        self.sizer = Sizer(config.max_tokens, config.timeout_s, local=is_loopback(self.client.host))
        self.proposals = 0  # proposals that asked the LLM (the limit is config.max_calls)
        self._probed = bool(self.context)
        self.token_scale = 1.0  # real tokens per estimated token, learned from a context overflow
        self.unusable_in_a_row = 0
        self.fallback_reason: str | None = None
        self._offline: Operator | None = None
        self._lock = threading.Lock()
        self._offline_lock = threading.Lock()
        self._rng = random.Random(seed)

    # ---- the search's hooks -------------------------------------------------------------------
    def set_deadline(self, deadline: float | None) -> None:
        self.search_deadline = deadline

    def cancel(self) -> None:
        self.client.cancel()

    def restore(self, proposal: Proposal) -> None:
        """Replay a child of an earlier session (`--resume`): the streak of unusable replies, and the
        fallback when it happened with the endpoint and models configured now (another endpoint or
        model list is asked again)."""
        if proposal.operator != self.name:
            if self.fallback_reason is not None:  # a child the offline operator wrote after the fallback
                with self._offline_lock:
                    self._offline_operator().restore(proposal)
            return
        meta = proposal.meta
        with self._lock:
            self.proposals += 1  # toward the limit on LLM proposals (config.max_calls)
            kind = meta.get("reply_kind")
            if kind == USABLE:
                self.unusable_in_a_row = 0
            elif kind and kind != "cancelled":
                self.unusable_in_a_row += 1
            reason = meta.get("llm_fallback")
            url = self.config.base_url.rstrip("/")
            same = str(meta.get("llm_endpoint", url)).rstrip("/") == url and sorted(
                meta.get("llm_models", self.config.models)
            ) == sorted(self.config.models)
            if reason and same and self.config.fallback_after and self.fallback_reason is None:
                self.fallback_reason = f"{reason} (in an earlier session of this run)"

    def observe(self, proposal: Proposal, parent_fitness: float, fitness: float) -> None:
        if proposal.operator != self.name:
            if self._offline is not None or self.fallback_reason is not None:
                with self._offline_lock:
                    self._offline_operator().observe(proposal, parent_fitness, fitness)
            return
        model = proposal.meta.get("model")
        if model:
            with self._lock:
                self.bandit.update(model, 1.0 if fitness > parent_fitness else 0.0)

    # ---- budgets ------------------------------------------------------------------------------
    def budgets(self) -> tuple[int, int]:
        """(prompt budget, reply budget) in tokens, from the served context when it is known."""
        with self._lock:
            if not self._probed:
                self._probed = True
                found = self.client.served_context(timeout=5.0)
                if found is not None:
                    self.context, self.context_source = found
                elif self.sizer.local:
                    self.context = LOCAL_CONTEXT
                    self.context_source = (
                        f"assumed ({LOCAL_CONTEXT} tokens): the local server does not say its window;"
                        " pass --llm-context"
                    )
            ctx, scale = self.context, self.token_scale
        reply = self.sizer.reply_tokens(ctx)
        if not ctx:
            return self.config.prompt_budget_tokens, reply
        prompt = int((ctx - reply - CHAT_OVERHEAD_TOKENS) / scale)
        return self.sizer.prompt_tokens(max(prompt, MIN_PROMPT_TOKENS), MIN_PROMPT_TOKENS), reply

    def _deadline(self, prompt_tokens: int, reply_tokens: int) -> float:
        d = time.monotonic() + self.sizer.timeout_s(int(prompt_tokens * self.token_scale), reply_tokens)
        if self.search_deadline is not None:
            d = min(d, self.search_deadline - SEARCH_END_MARGIN_S)
        return d

    # ---- one proposal -------------------------------------------------------------------------
    def propose(self, ctx: OperatorContext) -> Proposal:
        if self.fallback_reason is None and self.config.max_calls and self.proposals >= self.config.max_calls:
            with self._lock:
                self.fallback_reason = self.fallback_reason or (
                    f"the limit of {self.config.max_calls} LLM proposals was reached (--llm-calls)"
                )
            p = self._offline_proposal(ctx)
            p.meta.update(llm_fallback=self.fallback_reason, llm_endpoint=self.config.base_url)
            p.meta["llm_models"] = list(self.config.models)
            return p
        if self.fallback_reason is not None:
            return self._offline_proposal(ctx)
        with self._lock:
            model = self.bandit.choose()
            self.proposals += 1
        rec, reading, template, user = self._call(model, ctx)
        return self.finish(
            reading,
            model,
            ctx,
            Proposal(None, "", self.name, template=template, prompt=user, llm_calls=[rec]),
            f": {_first_sentence(rec.reply or '')}",
        )

    def finish(
        self, reading: Reading, model: str, ctx: OperatorContext, proposal: Proposal, summary: str
    ) -> Proposal:
        """`proposal` (its prompt, calls and tool calls set) completed from the reading of the reply: the
        code or why there is none, described by model and reply form (plus `summary` where there is
        code), noted for the statistics and reviewed."""
        proposal.code, proposal.error, proposal.verdict = reading.code, reading.error, reading.verdict
        proposal.description = (
            f"{model}: {reading.kind}" if reading.code is None else f"{model} ({reading.form})"
        )
        proposal.meta = {"model": model, "reply_kind": reading.kind, **proposal.meta}
        if reading.code is not None:
            proposal.description += summary
        self._note(reading, proposal)
        return self.reviewed(proposal, model, ctx)

    def reviewed(self, proposal: Proposal, model: str, ctx: OperatorContext) -> Proposal:
        """With `config.review`, the reviewer pass's call and finding added to a proposal with code."""
        if not self.config.review or proposal.code is None or self.client.cancelled:
            return proposal
        from kegen.search.operators.llm.review import review

        rec, finding = review(self, model, ctx, proposal.code)
        proposal.llm_calls.append(rec)
        proposal.meta["review"] = finding
        return proposal

    def _call(self, model: str, ctx: OperatorContext) -> tuple[LLMCallRecord, Reading, str, str]:
        prompt_budget, reply_tokens = self.budgets()
        template, system, user = render_prompt(ctx, prompt_budget, self.knowledge_share)
        deadline = self._deadline(estimate_tokens(system + user), reply_tokens)
        rec = LLMCallRecord(model=model, attempts=0)
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        result = self.turn(rec, msgs, reply_tokens, deadline)
        overflow = context_overflow(result.error or "") if result.http_status == 400 else None
        if overflow is not None:  # fit the prompt to the window the server named, once
            self._learn(overflow.context, overflow.prompt_tokens, system + user)
            prompt_budget, reply_tokens = self.budgets()
            template, system, user = render_prompt(ctx, prompt_budget, self.knowledge_share)
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            result = self.turn(rec, msgs, reply_tokens, deadline)
        self._cost(rec)
        rec.reply, rec.finish_reason = result.text or None, result.finish_reason
        reading = read_reply(result, system + "\n" + user, ctx.parent_code, reply_tokens)
        if reading.kind == "context_overflow":
            need = int(estimate_tokens(system + user) * self.token_scale)
            reading = Reading(
                reading.kind,
                error=f"{reading.error} — the smallest prompt kegen can write (~{need} tokens) and a reply of"
                f" {reply_tokens} tokens do not fit the served context ({self.context or '?'} tokens):"
                " serve a larger context (llama.cpp --n_ctx / -c) or lower KEGEN_LLM_MAX_TOKENS",
            )
        rec.reply_kind = reading.kind
        rec.status = "ok" if result.status == "ok" else "error"
        rec.error = None if result.status == "ok" else result.error
        return rec, reading, template, user

    def turn(
        self,
        rec: LLMCallRecord,
        messages: list[dict[str, Any]],
        reply_tokens: int,
        deadline: float,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult:
        """One chat completion of `rec.model` with retries of fast failures inside `deadline`; its
        tokens and latency are added to `rec`, its speed to the sizer."""
        result = ChatResult("cancelled", error="no time was left in the search for this call")
        for attempt in range(self.config.max_retries + 1):
            if time.monotonic() >= deadline or self.client.cancelled:
                break
            rec.attempts += 1
            result = self.client.complete(
                rec.model, messages, max_tokens=reply_tokens, temperature=self.config.temperature,
                deadline=deadline, tools=tools,
            )  # fmt: skip
            _account(rec, result)
            if result.status == "ok":
                r = result
                speed = measure(r.prompt_tokens, r.completion_tokens, r.first_token_s, r.latency_s)
                self.sizer.observe(speed)
            if not result.retryable or attempt >= self.config.max_retries:
                break
            delay = self._backoff(attempt, result.retry_after)
            if time.monotonic() + delay >= deadline:
                break
            time.sleep(delay)
        return result

    def _cost(self, rec: LLMCallRecord) -> None:
        rec.cost = (
            rec.prompt_tokens * self.config.cost_per_1k_input
            + rec.completion_tokens * self.config.cost_per_1k_output
        ) / 1000.0

    def _learn(self, context: int, prompt_tokens: int | None, sent: str) -> None:
        """The server named its window (and maybe the prompt's real size): fit later prompts to it."""
        with self._lock:
            self.context, self.context_source = context, "the server's context-length error"
            if prompt_tokens:
                real_per_estimated = prompt_tokens / max(estimate_tokens(sent), 1)
                self.token_scale = max(self.token_scale, real_per_estimated * 1.05)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self.config.backoff_base_s * (2**attempt) * (1.0 + 0.25 * self._rng.random())
        if retry_after is not None:
            delay = max(delay, retry_after)
        return float(min(delay, self.config.backoff_max_s))

    # ---- fallback -----------------------------------------------------------------------------
    def _note(self, reading: Reading, proposal: Proposal) -> None:
        with self._lock:
            if reading.kind == USABLE:
                self.unusable_in_a_row = 0
                return
            if reading.kind == "cancelled":
                return
            self.unusable_in_a_row += 1
            k = self.config.fallback_after
            reason = None
            if reading.kind == "unreachable" and k:
                reason = f"the endpoint {self.config.base_url} is unreachable ({reading.error})"
            elif k and self.unusable_in_a_row >= k:
                reason = f"{self.unusable_in_a_row} unusable LLM replies in a row (last: {reading.kind})"
            if reason is not None and self.fallback_reason is None:
                self.fallback_reason = reason
                proposal.meta["llm_fallback"] = reason
                proposal.meta["llm_endpoint"] = self.config.base_url
                proposal.meta["llm_models"] = list(self.config.models)

    def _offline_operator(self) -> Operator:
        """The offline operator that writes children after the fallback (made once; hold _offline_lock)."""
        from kegen.search.operators.offline import OfflineOperator

        if self._offline is None:
            self._offline = OfflineOperator(self.config, seed=self.seed)
        return self._offline

    def _offline_proposal(self, ctx: OperatorContext) -> Proposal:
        with self._offline_lock:
            p = self._offline_operator().propose(ctx)
        p.meta["fallback"] = True
        p.description = f"[offline fallback] {p.description}"
        return p


def _account(rec: LLMCallRecord, result: ChatResult) -> None:
    rec.prompt_tokens += result.prompt_tokens
    rec.completion_tokens += result.completion_tokens
    rec.tokens_estimated = rec.tokens_estimated or result.tokens_estimated
    rec.latency_s += result.latency_s


def _first_sentence(reply: str) -> str:
    text = reply.split("```", 1)[0].strip().replace("\n", " ")
    return (text[:117] + "...") if len(text) > 120 else (text or "(no explanation)")
