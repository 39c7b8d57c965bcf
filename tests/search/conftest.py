"""Shared fixtures of the search tests: the fake evaluator on sys.path, a store in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "kegen" / "examples"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def store(tmp_path):
    from kegen.search.store import GraphStore

    s = GraphStore(tmp_path / "search.db")
    yield s
    s.close()
