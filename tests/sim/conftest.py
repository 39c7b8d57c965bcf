import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mtia_sim import Simulator  # noqa: E402


@pytest.fixture(scope="module")
def sim() -> Simulator:
    """One simulator per test module (the DRAM arena is lazily zeroed, so this is cheap)."""
    return Simulator("mtia-2i", dram_arena_bytes=64 << 20, max_instructions=2_000_000)
