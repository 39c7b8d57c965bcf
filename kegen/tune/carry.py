"""A winning change carried from one variant's group to the same group at another variant.

The search changes a group's seed at one variant's shapes (block sizes, launch options, a GEMM
plan); the same group at another variant has the same code with other sizes. `change_of` reads the
change as line hunks of the two sources (both through `ast.unparse`, so formatting does not count);
`apply_change` replays it on another seed: a hunk's old lines must be found in that seed, where a
number the change left alone (a size) may differ and a number it changed (a block size) must match.
Whatever comes out is only a candidate: the composed model is measured and verified like any other.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path
from typing import Any

from kegen.tune.budget import allocate

_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")

Hunk = tuple[list[str], list[str]]


def _lines(source: str) -> list[str] | None:
    try:
        return ast.unparse(ast.parse(source)).splitlines()
    except SyntaxError:
        return None


def change_of(seed: str, winner: str) -> list[Hunk]:
    """The hunks (old lines, new lines) that turn `seed` into `winner`; [] when they cannot be read."""
    a, b = _lines(seed), _lines(winner)
    if a is None or b is None:
        return []
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def _pattern(old: str, new: str | None) -> tuple[re.Pattern[str], list[int]]:
    """`old` as a regex where each number `new` keeps in the same place is any number (a size);
    also the indexes of those wildcard numbers."""
    old_nums = _NUM.findall(old)
    new_nums = _NUM.findall(new) if new is not None else []
    same_skeleton = new is not None and _NUM.sub("#", old) == _NUM.sub("#", new)
    parts, wild, last = [], [], 0
    for i, m in enumerate(_NUM.finditer(old)):
        parts.append(re.escape(old[last : m.start()]))
        if same_skeleton and new_nums[i] == old_nums[i] or not same_skeleton and m.group() in new_nums:
            parts.append(r"(\d+(?:\.\d+)?)")
            wild.append(i)
        else:
            parts.append(re.escape(m.group()))
        last = m.end()
    parts.append(re.escape(old[last:]))
    return re.compile("^" + "".join(parts) + "$"), wild


def _rewrite(line: str, old: str, new: str) -> str | None:
    """`new` with the sizes `line` has where `old` had them (None: `line` is not `old` at other sizes)."""
    pat, wild = _pattern(old, new)
    m = pat.match(line)
    if m is None:
        return None
    sizes = dict(zip(wild, m.groups(), strict=True))
    old_nums = _NUM.findall(old)
    if _NUM.sub("#", old) == _NUM.sub("#", new):  # same line, some numbers changed: keep the sizes
        it = iter(range(len(old_nums)))
        return _NUM.sub(lambda mm: sizes.get(next(it), mm.group()), new)
    by_value = {old_nums[i]: v for i, v in sizes.items()}  # a new line: sizes by the old value
    return _NUM.sub(lambda mm: by_value.get(mm.group(), mm.group()), new)


def _match_all(old: list[str], window: list[str]) -> dict[str, str] | None:
    """Numbers of `old` -> the numbers `window` has in their place (every number a wildcard), or None."""
    sizes: dict[str, str] = {}
    for o, w in zip(old, window, strict=True):
        pat, _ = _pattern(o, o)
        m = pat.match(w)
        if m is None:
            return None
        for k, v in zip(_NUM.findall(o), m.groups(), strict=True):
            if sizes.setdefault(k, v) != v:
                return None
    return sizes


def _with_sizes(line: str, sizes: dict[str, str]) -> str:
    return _NUM.sub(lambda mm: sizes.get(mm.group(), mm.group()), line)


def apply_change(change: list[Hunk], seed: str) -> str | None:
    """`seed` with every hunk of `change` replayed (sizes kept), or None when a hunk does not fit."""
    lines = _lines(seed)
    if lines is None or not change:
        return None
    for old, new in change:
        if not old:  # a pure insertion has no anchor: not placed
            return None
        n = len(old)
        hits = [s for s in range(len(lines) - n + 1) if _match_all(old, lines[s : s + n]) is not None]
        if len(hits) != 1:
            return None
        start = hits[0]
        window = lines[start : start + n]
        if len(new) == n:
            out = [_rewrite(w, o, nw) for w, o, nw in zip(window, old, new, strict=True)]
        else:  # a rewritten block: numbers of the old lines take the seed's values
            out = [_with_sizes(nw, _match_all(old, window) or {}) for nw in new]
        if any(x is None for x in out):
            return None
        lines[start : start + n] = [x for x in out if x is not None]
    return "\n".join(lines) + "\n"


SEARCH_DEPTH = 2  # evaluations per search at the variant that spends the most time in the group


def signature(plan: dict[str, Any], gi: int) -> str:
    """The group's identity across variants: its kernel's name and how many groups before it have
    that kernel (`addmm#2` is the third addmm at every variant with the same graph)."""
    groups = plan["groups"]
    kernel = groups[gi]["kernel"]
    return f"{kernel}#{sum(1 for g in groups[:gi] if g['kernel'] == kernel)}"


def allocate_searches(
    budget: int, gains: dict[str, float], plans: list[dict[str, Any]], depth: int = SEARCH_DEPTH
) -> dict[str, int]:
    """`budget` evaluations over "k/gi" problems: the same group at several variants is searched
    once, at the variant where it spends the most time above its floor (the others get the winner's
    change, `carry_winners`); groups by their time above the floor summed over variants, the top
    `budget // depth` ones searched with at least `depth` evaluations each, the rest none."""
    total: dict[str, float] = {}
    rep: dict[str, str] = {}
    for pk, gain in gains.items():
        k, gi = (int(x) for x in pk.split("/"))
        sig = signature(plans[k], gi)
        total[sig] = total.get(sig, 0.0) + gain
        if sig not in rep or gain > gains[rep[sig]]:
            rep[sig] = pk
    out = dict.fromkeys(gains, 0)
    ranked = [s for s in sorted(total, key=lambda s: -total[s]) if total[s] > 0]
    top = ranked[: max(1, budget // max(1, depth))]
    if not top or budget <= 0:
        return out
    share = allocate(budget, {rep[s]: total[s] for s in top}, minimum=depth)
    out.update(share)
    return out


_TEMPLATES: dict[str, str | None] = {}


def _template_draft(problem: str) -> str | None:
    """kegen's template draft of a group problem (`drafting.analyze`, the lift's views applied), or
    None where no template takes it; drafted once per problem file."""
    if problem not in _TEMPLATES:
        from kegen.search.operators.drafting import analyze

        try:
            _TEMPLATES[problem] = analyze(Path(problem)).source
        except Exception:  # a recogniser: no template, no carry from one
            _TEMPLATES[problem] = None
    return _TEMPLATES[problem]


def winner_change(winner: str, group: dict[str, Any]) -> tuple[bool, list[Hunk]]:
    """(whether `winner`, found for `group`, started from kegen's template draft; its change from that
    start). The start is the group's seed (Inductor's draft), or the template draft where the winner is
    closer to it (fewer changed lines: the search began from the template beside the seed)."""
    from_seed = change_of(Path(group["seed_path"]).read_text(), winner)
    template = _template_draft(group["problem"]) if "problem" in group else None
    from_template = change_of(template, winner) if template else None
    if from_template is None or _size(from_seed) <= _size(from_template):
        return False, from_seed
    return True, from_template


def replay(change: list[Hunk], from_template: bool, other: dict[str, Any]) -> str | None:
    """A `winner_change` replayed on the same group at another variant (`other`): on its seed, or on
    its template draft (whose code reads the sizes at run time; the draft itself for an empty change,
    a winner that is the template)."""
    if not from_template:
        return apply_change(change, Path(other["seed_path"]).read_text())
    template = _template_draft(other["problem"]) if "problem" in other else None
    if template is None:
        return None
    return template if not change else apply_change(change, template)


def _size(change: list[Hunk]) -> int:
    return sum(len(old) + len(new) for old, new in change)


def carry_winners(found: dict[str, dict[str, Any]], plans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For every searched group whose winner beat its seed, the winner's change replayed on the same
    group's seed at each variant that was not searched ({"k/gi": found-like entry, "carried": True})."""
    out: dict[str, dict[str, Any]] = {}
    for pk, f in sorted(found.items(), key=lambda kv: -float(kv[1].get("speedup") or 1.0)):
        if not f.get("source") or float(f.get("speedup") or 1.0) <= 1.0:
            continue
        k, gi = (int(x) for x in pk.split("/"))
        sig = signature(plans[k], gi)
        from_template, change = winner_change(f["source"], plans[k]["groups"][gi])
        for k2, plan in enumerate(plans):
            for gi2 in range(len(plan["groups"])):
                key = f"{k2}/{gi2}"
                if key in found or key in out or signature(plan, gi2) != sig:
                    continue
                src = replay(change, from_template, plan["groups"][gi2])
                if src is not None:
                    out[key] = {
                        "source": src,
                        "speedup": f["speedup"],  # at variant k; at k2 the composed model's time decides
                        "change": f"{f.get('change', '')} (carried from variant {k})",
                        "carried": True,
                    }
    return out
