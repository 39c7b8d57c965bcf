"""Taking code out of an LLM reply: a whole file in a fenced block, or search/replace edits.

Text copied from kegen's own prompt is never taken as a candidate: an edit block that appears in
the prompt (the SEARCH/REPLACE example of the instructions), or a code block that is a verbatim
copy of a block of the prompt (the parent's code unchanged, the reference, a template's example),
is set aside; a reply whose only code is such copies is an `echo`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n)?```", re.DOTALL)
EDIT = re.compile(r"<<<<<<<\s*SEARCH\s*\n(.*?)\n?=======\s*\n(.*?)\n?>>>>>>>\s*REPLACE", re.DOTALL)
MIN_ECHO_CHARS = 40  # a copied block shorter than this (a line or two) is not called an echo


@dataclass(frozen=True)
class Extracted:
    """The code found in a reply, or why there is none (`verdict` no_code / invalid_code).

    `kind`: file | edits | none | echo (the only code in the reply was copied from the prompt).
    """

    code: str | None
    kind: str
    error: str | None = None
    verdict: str | None = None


def normalize(text: str) -> str:
    """Text with each line stripped and blank lines dropped (what "copied" compares)."""
    return "\n".join(s for line in text.splitlines() if (s := line.strip()))


def _copied(body: str, prompt_norm: str) -> bool:
    n = normalize(body)
    return len(n) >= MIN_ECHO_CHARS and n in prompt_norm


def extract_code(reply: str, parent_code: str, prompt: str = "") -> Extracted:
    """Search/replace edits apply to `parent_code`; otherwise the largest Python block is the file.

    `prompt` (system and user text) is what kegen sent: code copied from it is not a candidate.
    """
    prompt_norm = normalize(prompt) if prompt else ""
    examples = {(normalize(s), normalize(r)) for s, r in EDIT.findall(prompt)} if prompt else set()
    all_edits = EDIT.findall(reply)
    edits = [(s, r) for s, r in all_edits if (normalize(s), normalize(r)) not in examples]
    if edits:
        return _apply_edits(edits, parent_code)
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(reply)]
    candidates = [body for lang, body in blocks if lang in ("python", "py", "") and not EDIT.search(body)]
    own = [b for b in candidates if not (prompt_norm and _copied(b, prompt_norm))]
    if not own:
        if all_edits or len(own) < len(candidates):
            what = "the SEARCH/REPLACE example of the instructions" if all_edits else "code from the prompt"
            return Extracted(None, "echo", f"the reply only repeats {what}; no change of its own", "no_code")
        return Extracted(None, "none", "the reply has no fenced Python code block", "no_code")
    full = [b for b in own if "ModelNew" in b] or own
    return _checked(max(full, key=len), "file")


def _apply_edits(edits: list[tuple[str, str]], parent_code: str) -> Extracted:
    code = parent_code
    for i, (search, replace) in enumerate(edits, 1):
        if search not in code:
            stripped = _match_ignoring_trailing_space(code, search)
            if stripped is None:
                return Extracted(
                    None, "edits", f"edit {i}: its SEARCH text is not in the parent's code", "invalid_code"
                )
            search = stripped
        code = code.replace(search, replace, 1)
    if normalize(code) == normalize(parent_code):
        return Extracted(None, "echo", "the edits leave the parent's code unchanged", "no_code")
    return _checked(code, "edits")


def _checked(code: str, kind: str) -> Extracted:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return Extracted(
            None, kind, f"the code does not parse: {exc.msg} (line {exc.lineno})", "invalid_code"
        )
    if "ModelNew" not in code:
        return Extracted(None, kind, "the code defines no ModelNew class", "invalid_code")
    return Extracted(code.rstrip() + "\n", kind)


def _match_ignoring_trailing_space(code: str, search: str) -> str | None:
    want = [line.rstrip() for line in search.splitlines()]
    lines = code.splitlines()
    for i in range(len(lines) - len(want) + 1):
        if [line.rstrip() for line in lines[i : i + len(want)]] == want:
            return "\n".join(lines[i : i + len(want)])
    return None
