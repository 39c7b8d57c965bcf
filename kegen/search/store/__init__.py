"""The search graph in SQLite: runs, nodes and their evaluations (`graph`), read by `queries`,
with prompts, LLM calls and artifacts beside them (`records`); the tables and row types in `rows`.

    from kegen.search.store import GraphStore
    store = GraphStore("runs/graph.db")
"""

from kegen.search.store.graph import GraphStore
from kegen.search.store.rows import Evaluation, Node, Run, code_hash

__all__ = ["Evaluation", "GraphStore", "Node", "Run", "code_hash"]
