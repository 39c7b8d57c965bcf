"""Shared fixtures of the simulator tests."""

import pytest

from mtia_sim import Simulator


@pytest.fixture(scope="module")
def sim() -> Simulator:
    """One simulator per test module (the DRAM arena is lazily zeroed, so this is cheap)."""
    return Simulator("mtia-2i", dram_arena_bytes=64 << 20, max_instructions=2_000_000)
