"""The LLM operator: one chat completion per child from any OpenAI-compatible endpoint.

Retries with exponential backoff on rate limits (429), server errors (5xx), timeouts and dropped
connections; counts tokens and cost per call; takes the code from fenced blocks (whole file or
search/replace edits). A reply without usable code becomes a failed child, never an exception.
Several models may be configured: a UCB1 bandit picks one per step, rewarded by the child's gain.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any

from kegen.search.config import OperatorConfig
from kegen.search.operators.base import LLMCallRecord, Operator, Proposal
from kegen.search.operators.context import OperatorContext
from kegen.search.operators.extract import extract_code
from kegen.search.operators.prompt import render_prompt


class LLMUnavailable(RuntimeError):
    """The endpoint could not be reached or kept failing after every retry."""


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
    """Writes children with an OpenAI-compatible chat model."""

    name = "llm"

    def __init__(self, config: OperatorConfig, seed: int = 0, client: Any = None) -> None:
        if not config.base_url and client is None:
            raise LLMUnavailable(
                "the LLM operator needs an endpoint: set KEGEN_LLM_BASE_URL (and KEGEN_LLM_API_KEY),"
                " or use --operator offline"
            )
        self.config = config
        self.bandit = ModelBandit(tuple(config.models), random.Random(seed))
        self.client = client or self._make_client()

    def _make_client(self) -> Any:
        import openai

        return openai.OpenAI(
            base_url=self.config.base_url,
            api_key=self.config.api_key or "unused",
            timeout=self.config.timeout_s,
            max_retries=0,
        )

    def propose(self, ctx: OperatorContext) -> Proposal:
        template, system, user = render_prompt(ctx, self.config.prompt_budget_tokens)
        model = self.bandit.choose()
        record, reply = self.complete(model, system, user)
        proposal = Proposal(
            None,
            f"{model}: no reply",
            self.name,
            error=record.error,
            verdict="no_code",
            template=template,
            prompt=user,
            llm_calls=[record],
            meta={"model": model},
        )
        if reply is None:
            return proposal
        got = extract_code(reply, ctx.parent_code)
        summary = _first_sentence(reply)
        if got.code is None:
            proposal.description, proposal.error, proposal.verdict = (
                f"{model}: {summary}",
                got.error,
                got.verdict,
            )
            return proposal
        proposal.code, proposal.description = got.code, f"{model} ({got.kind}): {summary}"
        proposal.error = proposal.verdict = None
        return proposal

    def complete(self, model: str, system: str, user: str) -> tuple[LLMCallRecord, str | None]:
        """One completion with retries; returns the usage record and the reply text (None on failure)."""
        import openai

        retryable = (
            openai.RateLimitError,
            openai.APITimeoutError,
            openai.APIConnectionError,
            openai.InternalServerError,
        )
        start = time.perf_counter()
        rec = LLMCallRecord(model=model, attempts=0)
        for attempt in range(self.config.max_retries + 1):
            rec.attempts = attempt + 1
            try:
                resp = self.client.chat.completions.create(
                    model=model,
                    temperature=self.config.temperature,
                    max_tokens=self.config.max_tokens,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                )
            except retryable as exc:
                rec.error = f"{type(exc).__name__}: {exc}"
                if attempt < self.config.max_retries:
                    time.sleep(self._backoff(attempt, exc))
                    continue
                break
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying will not help
                rec.error = f"{type(exc).__name__}: {exc}"
                break
            except Exception as exc:  # a malformed response body: recorded, the child fails
                rec.error = f"malformed reply: {type(exc).__name__}: {exc}"
                break
            usage = getattr(resp, "usage", None)
            rec.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            rec.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            rec.cost = (
                rec.prompt_tokens * self.config.cost_per_1k_input
                + rec.completion_tokens * self.config.cost_per_1k_output
            ) / 1000.0
            rec.latency_s = time.perf_counter() - start
            rec.error = None
            choices = getattr(resp, "choices", None) or []
            text = (choices[0].message.content or "") if choices else ""
            rec.reply = text
            return rec, text
        rec.status = "error"
        rec.latency_s = time.perf_counter() - start
        return rec, None

    def _backoff(self, attempt: int, exc: Exception) -> float:
        retry_after = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                retry_after = float(response.headers.get("retry-after", ""))
            except (TypeError, ValueError):
                retry_after = None
        delay = self.config.backoff_base_s * (2**attempt) * (1.0 + 0.25 * random.random())
        if retry_after is not None:
            delay = max(delay, retry_after)
        return float(min(delay, self.config.backoff_max_s))

    def observe(self, proposal: Proposal, parent_fitness: float, fitness: float) -> None:
        model = proposal.meta.get("model")
        if model:
            self.bandit.update(model, 1.0 if fitness > parent_fitness else 0.0)


def _first_sentence(reply: str) -> str:
    text = reply.split("```", 1)[0].strip().replace("\n", " ")
    return (text[:117] + "...") if len(text) > 120 else (text or "(no explanation)")
