"""Fixtures for every test: the process's selected mtia machine is reset after each test (commands
under test call `select_machine`, which makes a machine the process's default)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _reset_selected_machine() -> Iterator[None]:
    yield
    try:
        from lowering.backend.options import use_machine
    except ImportError:  # the mtia backend is not installed
        return
    use_machine(None)
