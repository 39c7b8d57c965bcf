"""Errors raised by the simulator. Each names where it happened: PE, core, program, PC, command, address.

Units raise these without knowing where they run; the core fills in the location with
`SimulationError.locate` before re-raising, so every message a user sees is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Location:
    """Where an error happened (None: unknown / not applicable)."""

    pe: int | None = None
    core: int | None = None
    program_id: tuple[int, int, int] | None = None
    pc: int | None = None
    command: str | None = None  # e.g. "SIMD_BINARY tag=12"
    address: int | None = None

    def merged(self, other: Location) -> Location:
        """Fill the unknown fields of self from `other`."""
        vals = {f.name: getattr(self, f.name) for f in fields(self)}
        for k, v in vals.items():
            if v is None:
                vals[k] = getattr(other, k)
        return replace(self, **vals)

    def describe(self) -> str:
        parts = []
        if self.pe is not None:
            parts.append(f"pe {self.pe}")
        if self.core is not None:
            parts.append(f"core {self.core}")
        if self.program_id is not None:
            parts.append(f"program {self.program_id}")
        if self.pc is not None:
            parts.append(f"pc {self.pc:#x}")
        if self.command is not None:
            parts.append(f"command {self.command}")
        if self.address is not None:
            parts.append(f"address {self.address:#x}")
        return ", ".join(parts)


class SimulationError(Exception):
    """Base class of everything the simulator raises about a program or an image."""

    hint = ""

    def __init__(self, reason: str, location: Location | None = None, **where: object) -> None:
        self.reason = reason
        loc = location or Location()
        if where:
            loc = replace(loc, **where)  # type: ignore[arg-type]
        self.location = loc
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.location.describe()
        msg = f"{self.reason} [{where}]" if where else self.reason
        return f"{msg}. {self.hint}" if self.hint else msg

    def locate(self, location: Location) -> SimulationError:
        """Fill in unknown location fields (in place) and return self."""
        self.location = self.location.merged(location)
        self.args = (self._message(),)
        return self

    def __str__(self) -> str:
        return self._message()


class RunawayError(SimulationError):
    """A program exceeded its instruction or command budget (an endless loop?)."""

    hint = "Check loop bounds, or raise max_instructions/max_commands of the Simulator"


class MemoryFaultError(SimulationError):
    """A wild access: the core or a unit touched an unmapped or protected address."""

    hint = "Check pointer arithmetic and that buffers were allocated large enough"


class MisalignedDescriptorError(SimulationError):
    """The address written to the DOORBELL register is not 8-byte aligned."""

    hint = "Command descriptors must start on an 8-byte boundary"


class LocalStoreOverflowError(SimulationError):
    """A command operand range lies (partly) outside the local store."""

    hint = "Reduce the tile size or fix the local-store offsets (see the machine's local_store_bytes)"


class IllegalCommandError(SimulationError):
    """A descriptor with a bad opcode, subop, dtype, shape or stride combination."""

    hint = "See mtia_sim/isa.py for the descriptor rules"


class DeviceAssertError(SimulationError):
    """The program wrote a non-zero status to the EXIT register (a failed device-side assert)."""


class CoreTrapError(SimulationError):
    """The control core trapped: illegal instruction, ecall, ebreak."""

    hint = "The image contains an instruction the RV64IMAFDC core cannot run"


class LinkError(SimulationError):
    """The ELF object could not be linked or loaded into an image."""
