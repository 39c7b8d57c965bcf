"""Every compilation in the lowering tests runs the tile-IR verifier after each pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lowering.pipeline import Instrumentation, instrument


@pytest.fixture(autouse=True)
def verify_each_pass() -> Iterator[None]:
    with instrument(Instrumentation(verify_each=True)):
        yield
