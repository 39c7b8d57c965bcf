"""Shared fixtures of the search tests: the fake evaluator on sys.path, a store in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kegen.search.store import GraphStore

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def store(tmp_path):
    s = GraphStore(tmp_path / "search.db")
    yield s
    s.close()
