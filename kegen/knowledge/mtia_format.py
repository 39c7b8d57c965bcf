"""Formatting helpers shared by the generated MTIA documents (sizes, rates, times, markdown tables) and
the machine descriptions they read."""

from __future__ import annotations

DEFAULT_MACHINE = "mtia-2i"


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:g} B"


def _rate(bps: float) -> str:
    return f"{bps / 1e12:g} TB/s" if bps >= 1e12 else f"{bps / 1e9:g} GB/s"


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _machines() -> list:  # list[MachineDescription]
    from mtia_sim.machine import list_machines, load_machine

    names = list_machines()
    ordered = [n for n in ("mtia-v1", "mtia-2i", "mtia-300") if n in names] + [
        n for n in names if n not in ("mtia-v1", "mtia-2i", "mtia-300")
    ]
    return [load_machine(n) for n in ordered]


def _default():  # MachineDescription
    from mtia_sim.machine import load_machine

    return load_machine(DEFAULT_MACHINE)
