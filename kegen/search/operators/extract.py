"""Taking code out of an LLM reply: a whole file in a fenced block, or search/replace edits."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n)?```", re.DOTALL)
EDIT = re.compile(r"<<<<<<<\s*SEARCH\s*\n(.*?)\n?=======\s*\n(.*?)\n?>>>>>>>\s*REPLACE", re.DOTALL)


@dataclass(frozen=True)
class Extracted:
    """The code found in a reply, or why there is none (`verdict` no_code / invalid_code)."""

    code: str | None
    kind: str  # file | edits | none
    error: str | None = None
    verdict: str | None = None


def extract_code(reply: str, parent_code: str) -> Extracted:
    """Search/replace edits apply to `parent_code`; otherwise the largest Python block is the file."""
    edits = EDIT.findall(reply)
    if edits:
        code = parent_code
        for i, (search, replace) in enumerate(edits, 1):
            if search not in code:
                stripped = _match_ignoring_trailing_space(code, search)
                if stripped is None:
                    return Extracted(
                        None,
                        "edits",
                        f"edit {i}: its SEARCH text is not in the parent's code",
                        "invalid_code",
                    )
                search = stripped
            code = code.replace(search, replace, 1)
        return _checked(code, "edits")
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(reply)]
    candidates = [body for lang, body in blocks if lang in ("python", "py", "")]
    if not candidates:
        return Extracted(None, "none", "the reply has no fenced Python code block", "no_code")
    full = [b for b in candidates if "ModelNew" in b] or candidates
    return _checked(max(full, key=len), "file")


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
