"""Wave-balanced tiles (D42): a dot kernel's programs cover runtime spans of their blocks so the
program count fills every wave of PEs at any shape. `kernel` rewrites the jit kernel, `tiles` the
launch, the runtime helper and the search moves."""

from kegen.search.operators.mutations.waves.tiles import (
    HELPER,
    HELPER_SOURCE,
    wave_tile_mutations,
    wave_tiles,
)

__all__ = ["HELPER", "HELPER_SOURCE", "wave_tile_mutations", "wave_tiles"]
