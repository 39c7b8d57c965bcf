"""The LLM operator and its parts: the streaming chat client (`client`), proxies (`proxy`), reply
readings (`replies`), prompts (`prompt`) and the single-shot operator (`operator`)."""

from kegen.search.operators.llm.operator import LLMOperator, LLMUnavailable, ModelBandit

__all__ = ["LLMOperator", "LLMUnavailable", "ModelBandit"]
