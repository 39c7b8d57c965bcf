"""Inductor tests need the mtia driver (a machine without a GPU); problems are written per test."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _mtia_driver() -> None:
    from lowering.backend.driver import MtiaDriver

    if not MtiaDriver.is_active():
        pytest.skip("the mtia driver is off on a machine with a GPU")
