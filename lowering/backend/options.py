"""The Triton adapter's side of the mtia options: the process's default machine and the mapping
between machines and Triton target arches.

The options themselves are the core's `lowering.options.MtiaOptions` (re-exported here): plain
values, the machine among them. `default_machine()` is the one place the adapter reads
`KEGEN_MACHINE`: the default for a `kernel[grid](...)` a user runs directly (the driver's current
target follows it, and `MtiaBackend.parse_options` turns the target's arch back into the machine).
kegen's commands and the evaluation worker hand their machine in as a value (`use_machine`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from lowering.options import (
    DEFAULT_MACHINE,
    MACHINE_PREFIX,
    PE_MAPPINGS,
    SRAM_MODES,
    MtiaOptions,
    machine_arch,
)

__all__ = [
    "DEFAULT_MACHINE",
    "MACHINE_PREFIX",
    "PE_MAPPINGS",
    "SRAM_MODES",
    "MtiaOptions",
    "arch_machine",
    "default_machine",
    "machine_arch",
    "machine_digest",
    "machine_scope",
    "use_machine",
]

_selected: str | None = None  # the machine `use_machine` made this process's


def default_machine() -> str:
    """The machine kernels compile and run for when nothing names one: the one `use_machine` selected
    in this process (kegen's `--machine`; an evaluation worker's init message), else `KEGEN_MACHINE`
    (a user running `kernel[grid](...)` directly), else mtia-2i."""
    return _selected or os.environ.get("KEGEN_MACHINE") or DEFAULT_MACHINE


def use_machine(machine: str | None) -> None:
    """Make `machine` this process's default machine (None: back to KEGEN_MACHINE / mtia-2i).
    Child processes do not inherit it: they are handed their machine as a value."""
    global _selected
    _selected = machine or None


@contextmanager
def machine_scope(machine: str | None) -> Iterator[None]:
    """`machine` as the default machine inside the block (nothing changes for None)."""
    if machine is None:
        yield
        return
    before = _selected
    use_machine(machine)
    try:
        yield
    finally:
        use_machine(before)


def arch_machine(arch: str) -> str:
    """The machine description of a Triton target arch ("2i" -> "mtia-2i"); raises ValueError naming
    the known arches when there is none."""
    from mtia_sim.machine import MachineDescriptionError, list_machines, load_machine

    if f"{MACHINE_PREFIX}{arch}" in list_machines():
        return f"{MACHINE_PREFIX}{arch}"
    try:
        load_machine(arch)  # a TOML path or another spelling of a shipped machine
    except (MachineDescriptionError, OSError):
        known = ", ".join(m.removeprefix(MACHINE_PREFIX) for m in list_machines())
        raise ValueError(f"unknown mtia arch {arch!r}: use one of {known} (or a machine TOML path)") from None
    return arch


def machine_digest(machine: str) -> str:
    """A digest of the machine description's content (part of the backend's cache key, so editing a
    machine file recompiles)."""
    from mtia_sim.machine import load_machine

    m = load_machine(machine)
    return hashlib.sha256(repr(sorted(m.to_dict().items())).encode()).hexdigest()[:16]
