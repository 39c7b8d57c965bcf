"""The suite tests' reduced scale: the problems read KEGEN_SUITE_SCALE."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

SCALE_ENV = "KEGEN_SUITE_SCALE"
SMALL = "0.0625"


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run the problems at 1/16 of their sizes (the scale knob they read)."""
    monkeypatch.setenv(SCALE_ENV, SMALL)
    yield
