"""Machine descriptions: the simulated chip's sizes, clocks, bandwidths and unit throughputs, as data.

A description is a TOML file (`mtia_sim/machines/NAME.toml`, or any path) validated on load into a
frozen `MachineDescription`. Every figure the simulator uses comes from the file; code only derives
from it (per-cycle rates, chip-wide peaks). The TOML is grouped in sections; the dataclass is flat:
`_SCHEMA` maps each dotted TOML key to its field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtia_sim import isa

MACHINES_DIR = Path(__file__).parent / "machines"
DEFAULT_MACHINE = "mtia-2i"

DPE_DTYPES = ("fp32", "fp16", "bf16", "int8", "fp8")
_DPE_DTYPE_BY_WIDTH = {1: "int8", 2: "fp16", 4: "fp32", 8: "fp32"}
"""Events carry only the operand width. 1-byte operands use the int8 rate (fp8 shares the width);
8-byte operands have no DPE path and use the fp32 rate."""

SIMD_WIDTHS = (1, 2, 4, 8)


class MachineDescriptionError(ValueError):
    """A machine description file is missing, malformed, or has a bad value (the message says where)."""


@dataclass(frozen=True)
class MachineDescription:
    """One simulated chip. Bandwidths are bytes/s, latencies ns unless the name says cycles."""

    name: str
    description: str
    clock_hz: float
    # grid
    pe_rows: int
    pe_cols: int
    cores_per_pe: int
    # memories
    local_store_bytes: int
    local_store_bw: float
    sram_bytes: int
    sram_bw: float
    sram_latency_ns: float
    sram_line_bytes: int
    dram_kind: str
    dram_bytes: int
    dram_bw: float
    dram_channels: int
    dram_latency_ns: float
    # network on chip
    noc_hop_latency_cycles: float
    noc_link_bw: float
    # DMA / fabric interface
    dma_setup_cycles: float
    dma_misaligned_penalty: float
    dma_burst_bytes: int
    dma_max_in_flight: int
    # dot-product engine
    dpe_setup_cycles: float
    dpe_flops_per_cycle_fp32: float
    dpe_flops_per_cycle_fp16: float
    dpe_flops_per_cycle_bf16: float
    dpe_flops_per_cycle_int8: float
    dpe_flops_per_cycle_fp8: float
    dpe_tile_m: int
    dpe_tile_n: int
    dpe_tile_k: int
    # SIMD engine
    simd_setup_cycles: float
    simd_elements_per_cycle_1b: float
    simd_elements_per_cycle_2b: float
    simd_elements_per_cycle_4b: float
    simd_elements_per_cycle_8b: float
    simd_transcendental_factor: float
    # reduction engine
    red_setup_cycles: float
    red_elements_per_cycle: float
    # memory layout unit
    mlu_setup_cycles: float
    mlu_bytes_per_cycle: float
    # control core and command processor
    core_cpi: float
    command_issue_cycles: float
    command_queue_depth: int
    # launch
    launch_overhead_ns: float
    job_replacement_ns: float
    # host interface (uploads from the host to device memory)
    host_link_bw: float
    host_link_latency_ns: float

    # ---- derived figures -------------------------------------------------------------------
    @property
    def num_pes(self) -> int:
        return self.pe_rows * self.pe_cols

    @property
    def cycle_s(self) -> float:
        return 1.0 / self.clock_hz

    def ns_to_cycles(self, ns: float) -> float:
        return ns * 1e-9 * self.clock_hz

    def cycles_to_seconds(self, cycles: float) -> float:
        return cycles / self.clock_hz

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram_bw / self.clock_hz

    @property
    def sram_bytes_per_cycle(self) -> float:
        return self.sram_bw / self.clock_hz

    @property
    def local_store_bytes_per_cycle(self) -> float:
        return self.local_store_bw / self.clock_hz

    @property
    def noc_link_bytes_per_cycle(self) -> float:
        return self.noc_link_bw / self.clock_hz

    @property
    def dram_latency_cycles(self) -> float:
        return self.ns_to_cycles(self.dram_latency_ns)

    @property
    def sram_latency_cycles(self) -> float:
        return self.ns_to_cycles(self.sram_latency_ns)

    @property
    def launch_overhead_cycles(self) -> float:
        return self.ns_to_cycles(self.launch_overhead_ns)

    @property
    def job_replacement_cycles(self) -> float:
        return self.ns_to_cycles(self.job_replacement_ns)

    def dpe_flops_per_cycle(self, dtype: str) -> float:
        """Per-PE dot-product engine FLOPs/cycle for a dtype name (fp32, fp16, bf16, int8, fp8)."""
        if dtype not in DPE_DTYPES:
            raise ValueError(f"unknown DPE dtype {dtype!r}; expected one of {', '.join(DPE_DTYPES)}")
        return float(getattr(self, f"dpe_flops_per_cycle_{dtype}"))

    @functools.cached_property
    def _rates_by_width(self) -> tuple[dict[int, float], dict[int, float]]:
        """(DPE FLOPs/cycle, SIMD elements/cycle) per operand width, computed once (the timing hot path)."""
        dpe = {w: self.dpe_flops_per_cycle(d) for w, d in _DPE_DTYPE_BY_WIDTH.items()}
        simd = {w: float(getattr(self, f"simd_elements_per_cycle_{w}b")) for w in SIMD_WIDTHS}
        return dpe, simd

    def dpe_flops_per_cycle_for_width(self, dtype_bytes: int) -> float:
        """Per-PE DPE FLOPs/cycle for an operand width in bytes (what events carry)."""
        dpe = self._rates_by_width[0]
        return dpe[dtype_bytes] if dtype_bytes in dpe else dpe[4]

    def simd_elements_per_cycle(self, dtype_bytes: int) -> float:
        """Per-PE SIMD elements/cycle for an element width in bytes (unknown widths use 4 bytes)."""
        simd = self._rates_by_width[1]
        return simd[dtype_bytes] if dtype_bytes in simd else simd[4]

    def pe_peak_flops(self, dtype: str = "fp16") -> float:
        """Dot-product engine peak FLOP/s of one PE."""
        return self.dpe_flops_per_cycle(dtype) * self.clock_hz

    def peak_flops(self, dtype: str = "fp16") -> float:
        """Dot-product engine peak FLOP/s of the whole chip."""
        return self.pe_peak_flops(dtype) * self.num_pes

    def pe_coords(self, pe: int) -> tuple[int, int]:
        """(row, col) of a PE index (row-major)."""
        return divmod(pe, self.pe_cols)

    def hops(self, a: int, b: int) -> int:
        """Manhattan distance between two PEs on the grid (NoC hops)."""
        (ra, ca), (rb, cb) = self.pe_coords(a), self.pe_coords(b)
        return abs(ra - rb) + abs(ca - cb)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """A short human-readable description, for docs and reports."""
        gib = 1 << 30
        lines = [
            f"{self.name}: {self.description}".rstrip(": "),
            f"  clock {self.clock_hz / 1e9:.3g} GHz, {self.pe_rows}x{self.pe_cols} PEs "
            f"({self.num_pes}), {self.cores_per_pe} RISC-V cores/PE",
            f"  local store {self.local_store_bytes // 1024} KiB/PE at "
            f"{self.local_store_bw / 1e12:.3g} TB/s; "
            f"SRAM {self.sram_bytes / (1 << 20):.0f} MiB at {self.sram_bw / 1e12:.3g} TB/s; "
            f"{self.dram_kind} {self.dram_bytes / gib:.0f} GiB, {self.dram_channels} channels, "
            f"{self.dram_bw / 1e9:.1f} GB/s",
            "  DPE peak: " + ", ".join(f"{d} {self.peak_flops(d) / 1e12:.1f} TFLOP/s" for d in DPE_DTYPES)
            + f" (per PE fp16 {self.pe_peak_flops('fp16') / 1e12:.2f} TFLOP/s)",
            f"  SIMD {self.simd_elements_per_cycle(2):g} elem/cycle/PE (16-bit), "
            f"reduction {self.red_elements_per_cycle:g} elem/cycle, MLU {self.mlu_bytes_per_cycle:g} B/cycle",
            f"  DMA: {self.dma_max_in_flight} in flight/PE, setup {self.dma_setup_cycles:g} cycles; "
            f"launch {self.launch_overhead_ns:g} ns, job replacement {self.job_replacement_ns:g} ns",
        ]
        return "\n".join(lines)


# dotted TOML key -> dataclass field
_SCHEMA: dict[str, str] = {
    "name": "name",
    "description": "description",
    "clock_hz": "clock_hz",
    "grid.pe_rows": "pe_rows",
    "grid.pe_cols": "pe_cols",
    "grid.cores_per_pe": "cores_per_pe",
    "local_store.bytes": "local_store_bytes",
    "local_store.bw": "local_store_bw",
    "sram.bytes": "sram_bytes",
    "sram.bw": "sram_bw",
    "sram.latency_ns": "sram_latency_ns",
    "sram.line_bytes": "sram_line_bytes",
    "dram.kind": "dram_kind",
    "dram.bytes": "dram_bytes",
    "dram.bw": "dram_bw",
    "dram.channels": "dram_channels",
    "dram.latency_ns": "dram_latency_ns",
    "noc.hop_latency_cycles": "noc_hop_latency_cycles",
    "noc.link_bw": "noc_link_bw",
    "dma.setup_cycles": "dma_setup_cycles",
    "dma.misaligned_penalty": "dma_misaligned_penalty",
    "dma.burst_bytes": "dma_burst_bytes",
    "dma.max_in_flight": "dma_max_in_flight",
    "dpe.setup_cycles": "dpe_setup_cycles",
    **{f"dpe.flops_per_cycle.{d}": f"dpe_flops_per_cycle_{d}" for d in DPE_DTYPES},
    "dpe.tile_m": "dpe_tile_m",
    "dpe.tile_n": "dpe_tile_n",
    "dpe.tile_k": "dpe_tile_k",
    "simd.setup_cycles": "simd_setup_cycles",
    **{f"simd.elements_per_cycle.{w}b": f"simd_elements_per_cycle_{w}b" for w in SIMD_WIDTHS},
    "simd.transcendental_factor": "simd_transcendental_factor",
    "reduction.setup_cycles": "red_setup_cycles",
    "reduction.elements_per_cycle": "red_elements_per_cycle",
    "mlu.setup_cycles": "mlu_setup_cycles",
    "mlu.bytes_per_cycle": "mlu_bytes_per_cycle",
    "core.cpi": "core_cpi",
    "core.command_issue_cycles": "command_issue_cycles",
    "core.command_queue_depth": "command_queue_depth",
    "launch.overhead_ns": "launch_overhead_ns",
    "launch.job_replacement_ns": "job_replacement_ns",
    "host.link_bw": "host_link_bw",
    "host.link_latency_ns": "host_link_latency_ns",
}

_ZERO_ALLOWED = frozenset({
    "sram_latency_ns", "dram_latency_ns", "noc_hop_latency_cycles", "dma_setup_cycles",
    "dma_misaligned_penalty", "dpe_setup_cycles", "simd_setup_cycles", "red_setup_cycles",
    "mlu_setup_cycles", "command_issue_cycles", "launch_overhead_ns", "job_replacement_ns",
    "host_link_latency_ns",
})
"""Fields that may be 0 (latencies, setup costs, penalties); every other number must be > 0."""

_FIELD_TYPES: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(MachineDescription)}


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _check_value(source: str, key: str, field: str, value: Any) -> Any:
    kind = _FIELD_TYPES[field]
    if kind == "str":
        if not isinstance(value, str) or (field == "name" and not value):
            raise MachineDescriptionError(f"{source}: key '{key}': expected a non-empty string, "
                                          f"got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MachineDescriptionError(f"{source}: key '{key}': expected a number, got {type(value).__name__} "
                                      f"{value!r}")
    if kind == "int" and not (isinstance(value, int) or float(value).is_integer()):
        raise MachineDescriptionError(f"{source}: key '{key}': expected an integer, got {value!r}")
    if not math.isfinite(value):
        raise MachineDescriptionError(f"{source}: key '{key}': expected a finite number, got {value!r}")
    if field in _ZERO_ALLOWED:
        if value < 0:
            raise MachineDescriptionError(f"{source}: key '{key}': must be >= 0, got {value!r}")
    elif value <= 0:
        raise MachineDescriptionError(f"{source}: key '{key}': must be > 0, got {value!r}")
    return int(value) if kind == "int" else float(value)


def _check_limits(source: str, m: MachineDescription) -> None:
    """Limits imposed by the programming model (mtia_sim/isa.py)."""
    if m.cores_per_pe > 2:
        raise MachineDescriptionError(f"{source}: key 'grid.cores_per_pe': the ISA has CORE_ID 0 or 1, "
                                      f"so at most 2 cores per PE, got {m.cores_per_pe}")
    if m.local_store_bytes > isa.PE_WINDOW_STRIDE:
        raise MachineDescriptionError(f"{source}: key 'local_store.bytes': at most {isa.PE_WINDOW_STRIDE} "
                                      f"bytes (the PE window stride), got {m.local_store_bytes}")
    if m.sram_bytes > isa.DRAM_BASE - isa.SRAM_BASE:
        raise MachineDescriptionError(f"{source}: key 'sram.bytes': at most {isa.DRAM_BASE - isa.SRAM_BASE} "
                                      f"bytes (the SRAM window), got {m.sram_bytes}")


def parse_machine(data: dict[str, Any], source: str = "<machine description>") -> MachineDescription:
    """Validate a parsed TOML table into a MachineDescription (errors name `source` and the key)."""
    flat = _flatten(data)
    unknown = sorted(k for k in flat if k not in _SCHEMA)
    if unknown:
        raise MachineDescriptionError(f"{source}: unknown key '{unknown[0]}'"
                                      + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                                      + "; known keys: " + ", ".join(_SCHEMA))
    missing = [k for k in _SCHEMA if k not in flat and k != "description"]
    if missing:
        raise MachineDescriptionError(f"{source}: missing key '{missing[0]}'"
                                      + (f" (and {len(missing) - 1} more: {', '.join(missing[1:])})"
                                         if len(missing) > 1 else ""))
    values = {field: _check_value(source, key, field, flat[key])
              for key, field in _SCHEMA.items() if key in flat}
    values.setdefault("description", "")
    machine = MachineDescription(**values)
    _check_limits(source, machine)
    return machine


def list_machines() -> list[str]:
    """Names of the machine descriptions shipped in mtia_sim/machines/."""
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))


def names_a_path(machine: str) -> bool:
    """Whether `machine` is read as a path to a TOML file (else as a shipped machine's name)."""
    return machine.endswith(".toml") or "/" in machine or "\\" in machine


def _resolve(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or names_a_path(text):
        return Path(name_or_path)
    path = MACHINES_DIR / f"{text}.toml"
    if not path.is_file():  # forgive spelling: "mtia2i", "MTIA_2i" -> "mtia-2i"
        def key(s: str) -> str:
            return s.lower().replace("-", "").replace("_", "")
        matches = [n for n in list_machines() if key(n) == key(text)]
        if len(matches) == 1:
            path = MACHINES_DIR / f"{matches[0]}.toml"
    if not path.is_file():
        raise MachineDescriptionError(f"unknown machine {text!r}; available: {', '.join(list_machines())} "
                                      "(or pass a path to a .toml file)")
    return path


def load_machine(name_or_path: str | Path = DEFAULT_MACHINE) -> MachineDescription:
    """Load and validate a machine description by name (see list_machines()) or by TOML path."""
    path = _resolve(name_or_path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MachineDescriptionError(f"{path}: cannot read machine description: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MachineDescriptionError(f"{path}: not valid TOML: {exc}") from None
    return parse_machine(data, str(path))
