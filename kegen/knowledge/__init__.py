"""The hardware knowledge base: index, retrieval for prompts, and learning from searches.

from kegen.knowledge import KnowledgeBase, Document, select_documents
kb = KnowledgeBase.default()          # shipped knowledge/ + the user's $KEGEN_HOME/knowledge
kb.entries                            # list[IndexEntry]
kb.read("hardware/mtia/programming.md")  # Document(path, title, text)
select_documents(kb, platform="mtia", op_class="matmul", bottleneck="memory", phase="optimize")
kb.search("local store budget")       # [(IndexEntry, score), ...]
save_learned_sample(kb, name=..., source=..., problem_path=..., provenance={...}, verify=...)
"""

from kegen.knowledge.index import (
    ANY,
    BOTTLENECKS,
    OP_CLASS_SYNONYMS,
    OP_CLASSES,
    PHASES,
    PLATFORMS,
    TAG_KEYS,
    IndexEntry,
    IndexFormatError,
    canonical_op_class,
)
from kegen.knowledge.learning import (
    LearningRejected,
    Provenance,
    sample_verifier,
    save_learned_note,
    save_learned_sample,
)
from kegen.knowledge.retrieval import select_documents
from kegen.knowledge.store import Document, DocumentNotFound, KnowledgeBase

__all__ = [
    "ANY",
    "BOTTLENECKS",
    "OP_CLASSES",
    "OP_CLASS_SYNONYMS",
    "PHASES",
    "PLATFORMS",
    "TAG_KEYS",
    "Document",
    "DocumentNotFound",
    "IndexEntry",
    "IndexFormatError",
    "KnowledgeBase",
    "LearningRejected",
    "Provenance",
    "canonical_op_class",
    "sample_verifier",
    "save_learned_note",
    "save_learned_sample",
    "select_documents",
]
