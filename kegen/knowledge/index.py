"""The knowledge base index: `index.md` parsed into entries with tags, and the tag vocabulary.

`index.md` lists every document on one line, grouped under `## section` headings:

    - [Title](path.md) — one-line summary. `platform=mtia op=any bottleneck=memory phase=draft,optimize`

The tag block is the last backquoted span on the line; each key takes comma-separated values from
the vocabulary below (`any` matches every value of its key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANY = "any"
PLATFORMS: tuple[str, ...] = ("mtia", "nvidia", "amd", ANY)
OP_CLASSES: tuple[str, ...] = (
    "elementwise",
    "reduction",
    "normalization",
    "softmax",
    "matmul",
    "attention",
    "convolution",
    "gather",
    "scan",
    "jagged",
    ANY,
)
BOTTLENECKS: tuple[str, ...] = ("memory", "compute", "latency", "correctness", ANY)
PHASES: tuple[str, ...] = ("draft", "debug", "optimize", ANY)

OP_CLASS_SYNONYMS: dict[str, str] = {
    "gemm": "matmul",
    "mm": "matmul",
    "bmm": "matmul",
    "linear": "matmul",
    "interaction": "matmul",
    "conv": "convolution",
    "norm": "normalization",
    "layernorm": "normalization",
    "rmsnorm": "normalization",
    "embedding": "gather",
    "index_select": "gather",
    "cumsum": "scan",
    "prefix_sum": "scan",
    "layout": "elementwise",
    "transpose": "elementwise",
    "copy": "elementwise",
    "pointwise": "elementwise",
    "search": ANY,
    "other": ANY,
}
"""Op-class names used elsewhere (suites, drafters) -> the vocabulary value that covers them."""

TAG_KEYS: dict[str, tuple[str, ...]] = {
    "platform": PLATFORMS,
    "op": OP_CLASSES,
    "bottleneck": BOTTLENECKS,
    "phase": PHASES,
}
"""Tag key in index.md -> its valid values."""

_LINE = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<path>[^)\s]+)\) — (?P<summary>.*) `(?P<tags>[^`]+)`\s*$")


class IndexFormatError(ValueError):
    """A malformed index line or an unknown tag (the message names the line and the fix)."""


@dataclass(frozen=True)
class IndexEntry:
    """One document of the knowledge base as the index describes it."""

    path: str
    title: str
    summary: str
    platforms: tuple[str, ...]
    op_classes: tuple[str, ...]
    bottlenecks: tuple[str, ...]
    phases: tuple[str, ...]
    section: str = ""

    @property
    def kind(self) -> str:
        """`sample` for code samples (Python files), `note` for markdown documents."""
        return "sample" if self.path.endswith(".py") else "note"

    def tags_text(self) -> str:
        return (
            f"platform={','.join(self.platforms)} op={','.join(self.op_classes)} "
            f"bottleneck={','.join(self.bottlenecks)} phase={','.join(self.phases)}"
        )

    def to_line(self) -> str:
        """The entry as one index.md line (the inverse of `parse_index_line`)."""
        return f"- [{self.title}]({self.path}) — {self.summary} `{self.tags_text()}`"


def validate_tag(key: str, value: str) -> str:
    """Return `value` if it is a valid tag for `key`; raise IndexFormatError naming the valid values."""
    if key not in TAG_KEYS:
        raise IndexFormatError(f"unknown tag key {key!r}; use one of {', '.join(TAG_KEYS)}")
    if value not in TAG_KEYS[key]:
        raise IndexFormatError(f"unknown {key} tag {value!r}; valid: {', '.join(TAG_KEYS[key])}")
    return value


def canonical_op_class(name: str) -> str:
    """`name` if it is an op-class tag, its vocabulary value if it is a known synonym (`gemm` ->
    `matmul`, `embedding` -> `gather`, ...); otherwise IndexFormatError naming the valid values."""
    key = name.strip().lower()
    if key in OP_CLASSES:
        return key
    if key in OP_CLASS_SYNONYMS:
        return OP_CLASS_SYNONYMS[key]
    raise IndexFormatError(
        f"unknown op class {name!r}; valid: {', '.join(OP_CLASSES)} "
        f"(or a synonym: {', '.join(sorted(OP_CLASS_SYNONYMS))})"
    )


def parse_tags(text: str) -> dict[str, tuple[str, ...]]:
    """Parse `platform=mtia op=matmul,attention ...` into key -> values; every key is required."""
    tags: dict[str, tuple[str, ...]] = {}
    for part in text.split():
        key, sep, values = part.partition("=")
        if not sep or not values:
            raise IndexFormatError(f"tag {part!r} is not key=value[,value...]")
        if key in tags:
            raise IndexFormatError(f"tag key {key!r} given twice")
        tags[key] = tuple(validate_tag(key, v) for v in values.split(","))
    missing = [k for k in TAG_KEYS if k not in tags]
    if missing:
        raise IndexFormatError(
            f"missing tag keys {', '.join(missing)} (each of {', '.join(TAG_KEYS)} is required)"
        )
    return tags


def parse_index_line(line: str, *, section: str = "", lineno: int = 0) -> IndexEntry:
    """Parse one `- [Title](path) — summary `tags`` line."""
    m = _LINE.match(line.rstrip())
    if m is None:
        raise IndexFormatError(
            f"index.md line {lineno}: expected '- [Title](path) — summary `tags`', got {line!r}"
        )
    try:
        tags = parse_tags(m["tags"])
    except IndexFormatError as exc:
        raise IndexFormatError(f"index.md line {lineno} ({m['path']}): {exc}") from None
    return IndexEntry(
        path=m["path"],
        title=m["title"].strip(),
        summary=m["summary"].strip(),
        platforms=tags["platform"],
        op_classes=tags["op"],
        bottlenecks=tags["bottleneck"],
        phases=tags["phase"],
        section=section,
    )


def parse_index(text: str) -> list[IndexEntry]:
    """All entries of an index.md text, in file order. Lines not starting with `- [` are prose."""
    entries: list[IndexEntry] = []
    section = ""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("- ["):
            entries.append(parse_index_line(line, section=section, lineno=lineno))
    return entries


def insert_entry(text: str, entry: IndexEntry, section: str) -> str:
    """Return index.md text with `entry` added at the end of `## section` (created if absent).

    An existing line for the same path is replaced in place.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("- [") and f"]({entry.path})" in line:
            lines[i] = entry.to_line()
            return "\n".join(lines) + "\n"
    heading = f"## {section}"
    if heading not in lines:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", heading, "", entry.to_line()]
        return "\n".join(lines) + "\n"
    start = lines.index(heading)
    last = start
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## "):
            break
        if lines[i].startswith("- ["):
            last = i
    if last == start:
        last = start + 1 if start + 1 < len(lines) and not lines[start + 1].strip() else start
    lines.insert(last + 1, entry.to_line())
    return "\n".join(lines) + "\n"
