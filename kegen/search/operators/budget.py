"""A token budget for a whole prompt: sections shrink by priority, never cut at a character count.

Tokens are estimated offline as `ceil(len(text) / CHARS_PER_TOKEN)` (no tokenizer download: code
and English both average 3.5-4 characters per token on BPE tokenizers; 3.5 errs on the safe side).
Each shrinkable section comes as a list of renderings from the fullest to the smallest (the
profile at detail 3, 2, 1, 0; the attempts newest-first with older ones dropped; the knowledge
documents with the least relevant dropped); the section with the lowest priority steps down first,
until the prompt fits or every section is at its smallest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHARS_PER_TOKEN = 3.5
DEFAULT_PROMPT_TOKENS = 12000


def estimate_tokens(text: str) -> int:
    """The estimated token count of `text` (see the module docstring)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Section:
    """A shrinkable part of the prompt: renderings fullest first; a lower `priority` number is kept longer."""

    name: str
    priority: int
    variants: list[str]
    chosen: int = 0

    @property
    def text(self) -> str:
        return self.variants[self.chosen] if self.variants else ""

    def can_shrink(self) -> bool:
        return self.chosen + 1 < len(self.variants)


@dataclass(frozen=True)
class Fitted:
    """The chosen rendering of each section, the estimated total and whether it fits."""

    texts: dict[str, str]
    tokens: int
    budget: int
    levels: dict[str, int]  # section -> index of the chosen rendering (0 = fullest)

    @property
    def fits(self) -> bool:
        return self.tokens <= self.budget


def fit(fixed_tokens: int, sections: list[Section], budget: int) -> Fitted:
    """Choose renderings so that `fixed_tokens` plus the sections fit `budget` (tokens)."""

    def total() -> int:
        return fixed_tokens + sum(estimate_tokens(s.text) for s in sections)

    while total() > budget:
        shrinkable = [s for s in sections if s.can_shrink()]
        if not shrinkable:
            break
        victim = max(shrinkable, key=lambda s: (s.priority, -s.chosen))
        victim.chosen += 1
    return Fitted(
        texts={s.name: s.text for s in sections},
        tokens=total(),
        budget=budget,
        levels={s.name: s.chosen for s in sections},
    )


def dropping(items: list[str], sep: str, empty: str) -> list[str]:
    """Renderings of `items` joined by `sep`, dropping the last item one at a time, then `empty`."""
    out = [sep.join(items[:n]) for n in range(len(items), 0, -1)]
    return out + [empty]
