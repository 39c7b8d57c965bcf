"""Choose the knowledge documents for one step of a search, within a size budget.

The selection reads like an agent browsing the base: first an excerpt of the index (the entries
that apply to this step, one line each), then the documents themselves, in the order of
`_rank`: this platform's constraints and its guide for the phase, general constraints, code
samples and guidance for the op class and bottleneck, other platform documents, general guidance.
Documents that do not fit the remaining budget are cut at a section boundary, or left out (the
index excerpt still names them, so a reader knows they exist). Deterministic: same inputs, same
output.

Passages for people at a terminal (commands to run, tools to open) are wrapped in
`<!-- human-only -->` ... `<!-- /human-only -->`: `kegen kb show` prints them, prompts never carry
them (`for_prompt`), since the model writing kernels cannot run anything; what those commands show
is in the prompt's measured profile.
"""

from __future__ import annotations

import re

from kegen.knowledge.index import ANY, IndexEntry, canonical_op_class, validate_tag
from kegen.knowledge.store import Document, KnowledgeBase

INDEX_EXCERPT_PATH = "index.md"
MIN_PARTIAL_CHARS = 1200
"""A document cut to fit is kept only if at least this much of it fits."""

_WEIGHTS = {"platform": 8, "op": 4, "bottleneck": 2, "phase": 1}
_HUMAN_ONLY = re.compile(r"[ \t]*<!-- human-only -->.*?<!-- /human-only -->[ \t]*\n?", re.DOTALL)


def for_prompt(text: str) -> str:
    """`text` without its human-only passages (commands and tools the model cannot use)."""
    return _HUMAN_ONLY.sub("", text)


def _matches(values: tuple[str, ...], wanted: str | None) -> bool:
    return wanted is None or wanted == ANY or wanted in values or ANY in values


def _exact(values: tuple[str, ...], wanted: str | None) -> bool:
    return wanted is not None and wanted != ANY and wanted in values


def _rank(
    e: IndexEntry, platform: str, op_class: str, bottleneck: str | None, phase: str
) -> tuple[int, int, str]:
    """Sort key: browsing group first, then specificity (more exact tags first), then path.

    Groups, in the order an agent reads: 0 this platform's constraints; 1 this platform's guide for
    this phase; 2 general constraints; 3 code samples of this op class; 4 guidance for this op class
    or bottleneck; 5 other documents of this platform; 6 the rest (general guidance). The platform's
    own documents come first because they hold what a model cannot know from training.
    """
    exact = {
        "platform": _exact(e.platforms, platform),
        "op": _exact(e.op_classes, op_class),
        "bottleneck": _exact(e.bottlenecks, bottleneck),
        "phase": _exact(e.phases, phase),
    }
    specificity = sum(_WEIGHTS[k] for k, hit in exact.items() if hit)
    constraint = e.path.startswith("constraints/")
    if constraint and exact["platform"]:
        group = 0
    elif exact["platform"] and exact["phase"]:
        group = 1
    elif constraint:
        group = 2
    elif e.kind == "sample" and exact["op"]:
        group = 3
    elif exact["op"] or exact["bottleneck"]:
        group = 4
    elif exact["platform"]:
        group = 5
    else:
        group = 6
    return (group, -specificity, e.path)


def matching_entries(
    kb: KnowledgeBase, *, platform: str, op_class: str, bottleneck: str | None, phase: str
) -> list[IndexEntry]:
    """Entries whose tags admit this step, most specific first (ties broken by path)."""
    validate_tag("platform", platform)
    if bottleneck is not None:
        validate_tag("bottleneck", bottleneck)
    validate_tag("phase", phase)
    chosen = [
        e
        for e in kb.entries
        if _matches(e.platforms, platform)
        and _matches(e.op_classes, op_class)
        and _matches(e.bottlenecks, bottleneck)
        and _matches(e.phases, phase)
    ]
    chosen.sort(key=lambda e: _rank(e, platform, op_class, bottleneck, phase))
    return chosen


def index_excerpt(
    entries: list[IndexEntry], *, platform: str, op_class: str, bottleneck: str | None, phase: str
) -> Document:
    """The index lines of `entries` under a header naming the step they were chosen for."""
    head = (
        f"# Knowledge base index (entries for platform={platform} op={op_class} "
        f"bottleneck={bottleneck or ANY} phase={phase})\n\n"
    )
    body = "\n".join(e.to_line() for e in entries)
    return Document(path=INDEX_EXCERPT_PATH, title="Knowledge base index (excerpt)", text=head + body + "\n")


def cut_to_budget(doc: Document, budget: int) -> Document | None:
    """`doc` whole if it fits, else its leading `## ` sections that fit with a note, else None.

    Code samples are never cut (half a kernel teaches the wrong thing).
    """
    if len(doc.text) <= budget:
        return doc
    if not doc.path.endswith(".md"):
        return None
    note = "\n[... the rest of this document was left out to fit the prompt]\n"
    room = budget - len(note)
    if room < MIN_PARTIAL_CHARS:
        return None
    cut = 0
    pos = doc.text.find("\n## ")
    while 0 <= pos <= room:
        cut = pos
        pos = doc.text.find("\n## ", pos + 1)
    if cut < MIN_PARTIAL_CHARS:
        return None
    return Document(path=doc.path, title=doc.title + " (excerpt)", text=doc.text[:cut].rstrip() + "\n" + note)


def select_documents(
    kb: KnowledgeBase,
    *,
    platform: str,
    op_class: str,
    bottleneck: str | None,
    phase: str,
    budget_chars: int = 12000,
) -> list[Document]:
    """The index excerpt, then the documents for this step, in order, within `budget_chars` in total.

    `platform`, `op_class`, `phase` and `bottleneck` take values of the tag vocabulary
    (`kegen.knowledge.index`); `any` or a `None` bottleneck means no filter on that key. `op_class`
    may also be a known synonym (`gemm`, `embedding`, `layout`... see `OP_CLASS_SYNONYMS`).
    """
    op_class = canonical_op_class(op_class)
    entries = matching_entries(kb, platform=platform, op_class=op_class, bottleneck=bottleneck, phase=phase)
    excerpt = index_excerpt(entries, platform=platform, op_class=op_class, bottleneck=bottleneck, phase=phase)
    if len(excerpt.text) > budget_chars:
        return [Document(excerpt.path, excerpt.title, excerpt.text[:budget_chars])]
    chosen = [excerpt]
    left = budget_chars - len(excerpt.text)
    for e in entries:
        full = kb.read(e.path)
        doc = cut_to_budget(Document(full.path, full.title, for_prompt(full.text)), left)
        if doc is not None:
            chosen.append(doc)
            left -= len(doc.text)
    return chosen
