"""Shared fixtures of the search tests: the fake evaluator on sys.path, a store in tmp_path, a run in it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kegen.search.store import GraphStore

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "kegen" / "examples"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def store(tmp_path):
    s = GraphStore(tmp_path / "search.db")
    yield s
    s.close()


def new_run(store: GraphStore, problem_path: str = "p.py") -> str:
    """A fresh run (target mtia, machine mtia-2i, empty config) in `store`; its id."""
    return store.create_run(
        problem_path=problem_path,
        problem_key="k",
        target="mtia",
        machine="mtia-2i",
        seed_hash=None,
        config={},
        out_dir=None,
    )
