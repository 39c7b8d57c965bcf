"""Reply budget and deadline of one LLM call, fitted to the served context and the server's speed.

With no flags a call is sized for the server it talks to, so that a small local model neither runs
out of time nor writes past its window:

- the context window: `--llm-context`, else what the server says (`/props`, `/v1/models`, `/slots`),
  else learned from a context-length 400, else `LOCAL_CONTEXT` for a server on this machine (a
  llama-cpp-python server does not say its window) and unknown for a remote one;
- the reply budget (`--llm-reply-tokens`, else auto): a quarter of the window (256..4096 tokens),
  4096 when the window is unknown; an explicit budget is held to half the window. Auto budgets also
  shrink to what the measured generation speed writes in `AUTO_GENERATION_S`;
- the prompt (auto deadlines): at most what the measured prompt speed reads in `PROMPT_READ_S`;
- the deadline (`--llm-timeout`, else auto): the time to read the prompt and write the reply at the
  measured speeds (the slowest of the last calls), times `DEADLINE_SLACK`; before any measurement a
  local server is assumed to read `GUESS_PROMPT_TPS` and write `GUESS_GENERATION_TPS` tokens/s, and a
  remote one gets `REMOTE_TIMEOUT_S`.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

LOCAL_CONTEXT = 4096
REMOTE_TIMEOUT_S = 120.0
GUESS_PROMPT_TPS = 40.0
GUESS_GENERATION_TPS = 8.0
DEADLINE_SLACK = 1.5
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 30.0, 900.0
AUTO_GENERATION_S = 240.0
PROMPT_READ_S = 90.0  # an auto-sized prompt is read in this long at the measured prompt speed
REPLY_MIN, REPLY_MAX = 256, 4096
KEEP = 5  # measurements kept (the slowest counts)


@dataclass(frozen=True)
class Speed:
    """Measured throughput of one call, tokens per second (None when not measurable)."""

    prompt_tps: float | None
    generation_tps: float | None


def measure(
    prompt_tokens: int, completion_tokens: int, first_token_s: float | None, latency_s: float
) -> Speed:
    """Speeds of a finished call: the prompt was read before the first token came, the rest is writing."""
    if first_token_s is None or first_token_s <= 0:
        return Speed(None, None)
    prompt = prompt_tokens / first_token_s if prompt_tokens > 0 else None
    writing = latency_s - first_token_s
    gen = completion_tokens / writing if completion_tokens >= 8 and writing > 0.05 else None
    return Speed(prompt, gen)


class Sizer:
    """Keeps the server's measured speeds; answers reply budgets and call timeouts (thread-safe)."""

    def __init__(self, reply_tokens: int, timeout_s: float, local: bool) -> None:
        self.explicit_reply = reply_tokens  # 0: auto
        self.explicit_timeout = timeout_s  # 0: auto
        self.local = local
        self._prompt: deque[float] = deque(maxlen=KEEP)
        self._gen: deque[float] = deque(maxlen=KEEP)
        self._lock = threading.Lock()

    def observe(self, speed: Speed) -> None:
        with self._lock:
            if speed.prompt_tps:
                self._prompt.append(speed.prompt_tps)
            if speed.generation_tps:
                self._gen.append(speed.generation_tps)

    def speeds(self) -> tuple[float | None, float | None]:
        """(prompt, generation) tokens per second: the slowest measured lately, None when unmeasured."""
        with self._lock:
            return (min(self._prompt) if self._prompt else None, min(self._gen) if self._gen else None)

    def reply_tokens(self, context: int | None) -> int:
        """The reply budget for a window of `context` tokens (None: unknown)."""
        if self.explicit_reply:
            return max(1, min(self.explicit_reply, context // 2)) if context else self.explicit_reply
        reply = min(max(context // 4, REPLY_MIN), REPLY_MAX) if context else REPLY_MAX
        _, gen = self.speeds()
        if gen is not None:
            reply = min(reply, max(REPLY_MIN, int(gen * AUTO_GENERATION_S)))
        return reply

    def prompt_tokens(self, budget: int, floor: int) -> int:
        """The prompt budget held to what the measured prompt speed reads in `PROMPT_READ_S` (auto
        deadlines only; never below `floor`)."""
        prompt_tps, _ = self.speeds()
        if self.explicit_timeout or prompt_tps is None:
            return budget
        return min(budget, max(floor, int(prompt_tps * PROMPT_READ_S)))

    def timeout_s(self, prompt_tokens: int, reply_tokens: int) -> float:
        """The deadline of one call that sends `prompt_tokens` and may write `reply_tokens`."""
        if self.explicit_timeout:
            return self.explicit_timeout
        prompt_tps, gen_tps = self.speeds()
        if prompt_tps is None and gen_tps is None and not self.local:
            return REMOTE_TIMEOUT_S
        need = prompt_tokens / (prompt_tps or GUESS_PROMPT_TPS) + reply_tokens / (
            gen_tps or GUESS_GENERATION_TPS
        )
        low = MIN_TIMEOUT_S if (prompt_tps or gen_tps) else REMOTE_TIMEOUT_S
        return float(min(max(need * DEADLINE_SLACK + 5.0, low), MAX_TIMEOUT_S))
