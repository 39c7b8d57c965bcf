"""Shared fixtures of the search tests: a store in tmp_path (the fake evaluator is
`tests.search.fake_eval:evaluate`)."""

from __future__ import annotations

import pytest

from kegen.search.store import GraphStore


@pytest.fixture
def store(tmp_path):
    s = GraphStore(tmp_path / "search.db")
    yield s
    s.close()
