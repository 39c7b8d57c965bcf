"""The knowledge base on disk: a folder of documents with an `index.md`, optionally layered.

The shipped base is the `knowledge` package folder. `KnowledgeBase.default()` layers the user's
folder (`$KEGEN_HOME/knowledge`, where `kegen kb add` and learning write) over it: the user's
entries come after the shipped ones and replace any with the same path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from kegen.knowledge.index import IndexEntry, parse_index

INDEX_NAME = "index.md"


@dataclass(frozen=True)
class Document:
    """A document's text as read from the knowledge base (path relative to its root)."""

    path: str
    title: str
    text: str


class DocumentNotFound(LookupError):
    """A path that is not in the index of the knowledge base."""


def shipped_root() -> Path:
    """The `knowledge/` folder shipped as package data."""
    import knowledge

    # knowledge/ may be imported as a regular or (in older editable installs) a namespace package
    for entry in knowledge.__path__:
        folder = Path(entry)
        if (folder / INDEX_NAME).is_file():
            return folder.resolve()
    raise FileNotFoundError(
        f"the shipped knowledge base has no {INDEX_NAME} (looked in {list(knowledge.__path__)}); "
        "reinstall kegen"
    )


def user_root() -> Path:
    """`$KEGEN_HOME/knowledge`: the user's layer, written by `kegen kb add` and by learning."""
    from kegen.settings import PathSettings

    return PathSettings.from_env().home / "knowledge"


class KnowledgeBase:
    """Documents under `root` listed by `root/index.md`, over an optional read-only `parent`."""

    def __init__(self, root: Path, *, parent: KnowledgeBase | None = None) -> None:
        self.root = Path(root)
        self.parent = parent

    @classmethod
    def default(cls) -> KnowledgeBase:
        """The shipped base with the user's layer (`$KEGEN_HOME/knowledge`) on top."""
        return cls(user_root(), parent=cls(shipped_root()))

    @classmethod
    def shipped(cls) -> KnowledgeBase:
        """The shipped base alone (what the tests check)."""
        return cls(shipped_root())

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    def own_entries(self) -> list[IndexEntry]:
        """Entries of this layer's index.md (empty when the layer has no index yet)."""
        if not self.index_path.is_file():
            return []
        return parse_index(self.index_path.read_text(encoding="utf-8"))

    @property
    def entries(self) -> list[IndexEntry]:
        """Every entry, parent layer first; a path listed in this layer replaces the parent's."""
        own = self.own_entries()
        if self.parent is None:
            return own
        mine = {e.path for e in own}
        return [e for e in self.parent.entries if e.path not in mine] + own

    def entry(self, path: str) -> IndexEntry:
        for e in self.entries:
            if e.path == path:
                return e
        raise DocumentNotFound(
            f"{path!r} is not in the knowledge base index; list documents with `kegen kb list`"
        )

    def file(self, path: str) -> Path:
        """The file that holds document `path` (this layer first, then the parent)."""
        if ".." in Path(path).parts or Path(path).is_absolute():
            raise DocumentNotFound(f"{path!r}: document paths are relative to the knowledge base root")
        if any(e.path == path for e in self.own_entries()):
            return self.root / path
        if self.parent is not None:
            return self.parent.file(path)
        raise DocumentNotFound(
            f"{path!r} is not in the knowledge base index; list documents with `kegen kb list`"
        )

    def read(self, path: str) -> Document:
        """The document at `path` (relative to the root, as index.md lists it)."""
        entry = self.entry(path)
        f = self.file(path)
        if not f.is_file():
            raise DocumentNotFound(
                f"index.md lists {path!r} but {f} does not exist; restore it or remove the line"
            )
        return Document(path=path, title=entry.title, text=f.read_text(encoding="utf-8"))

    def index_text(self) -> str:
        """The index as one text: every entry line, grouped by section, parent layer first."""
        lines: list[str] = []
        section = None
        for e in self.entries:
            if e.section != section:
                section = e.section
                lines += ["", f"## {section}"] if lines else [f"## {section}"]
            lines.append(e.to_line())
        return "\n".join(lines) + "\n"

    def search(self, query: str) -> list[tuple[IndexEntry, float]]:
        """Entries ranked by how well they match `query` (words in title, summary, tags, path, body).

        Deterministic: ties are broken by path. Entries that match nothing are left out.
        """
        terms = _terms(query)
        if not terms:
            return []
        scored: list[tuple[IndexEntry, float]] = []
        for e in self.entries:
            try:
                body = self.file(e.path).read_text(encoding="utf-8").lower()
            except (OSError, DocumentNotFound):
                body = ""
            score = _score(e, body, terms)
            if score > 0:
                scored.append((e, round(score, 3)))
        scored.sort(key=lambda pair: (-pair[1], pair[0].path))
        return scored


_WORD = re.compile(r"[a-z0-9_]+")


def _terms(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if len(t) > 1]


def _score(entry: IndexEntry, body: str, terms: list[str]) -> float:
    head = {
        "title": (set(_terms(entry.title)), 4.0),
        "summary": (set(_terms(entry.summary)), 2.0),
        "tags": (set(_terms(entry.tags_text().replace("=", " "))), 3.0),
        "path": (set(_terms(entry.path.replace("/", " ").replace("-", " "))), 2.0),
    }
    score = 0.0
    for term in terms:
        for words, weight in head.values():
            if term in words:
                score += weight
        hits = body.count(term)
        if hits:
            score += math.log2(1 + hits)
    return score
