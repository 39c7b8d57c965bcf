"""The LLM operators and their parts: the streaming chat client (`client`, `stream`), proxies
(`proxy`), reply readings (`replies`), prompts (`prompt`), reply budgets and deadlines (`sizing`), the
single-shot operator (`operator`), the agent over kegen's tools (`agent`, `tools`, `tool_worker`) and
the reviewer pass (`review`)."""

from kegen.search.operators.llm.operator import LLMOperator, LLMUnavailable, ModelBandit

__all__ = ["LLMOperator", "LLMUnavailable", "ModelBandit"]
