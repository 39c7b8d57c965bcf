"""The screening probe: compile a candidate in the evaluator's sandbox and record its launches
without simulating them.

It runs in the trusted evaluator's process (the executor's task), never in the candidate's, through
the public `kegen.eval.trusted.recording.record_candidate`: the candidate is loaded and called once in the
same bubblewrap worker `kegen.eval` uses, and a recording device answers every launch with a digest
of what it asked for and pseudo-random results. The digest of all launches plus the outputs is the
candidate's *artifact key*: two candidates with the same key asked the chip for exactly the same
work and returned the same views of its results. The worker's Triton cache is kept by source as in
an evaluation, so the evaluation that follows a probe does not compile again.

The probe also measures what a static lower bound needs: the problem's roofline (FLOPs and minimum
bytes of the reference) and, per launch, programs and SRAM mode.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LaunchSummary:
    """One launch as the probe saw it (what the static bound reads)."""

    kernel: str
    grid: tuple[int, int, int]
    sram_mode: str
    dual_core: bool
    elf_sha256: str

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass
class ProbeResult:
    """What the probe found: a key (ok), the compiler's message (compile_error), or why it could not
    tell (failed: the candidate is then simply evaluated)."""

    status: str  # "ok" | "compile_error" | "failed"
    message: str = ""
    key: str | None = None
    launches: list[LaunchSummary] = field(default_factory=list)
    roofline: dict[str, float] = field(default_factory=dict)
    duration_s: float = 0.0
    source_line: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["launches"] = [dict(asdict(x), programs=x.programs) for x in self.launches]
        return data


def probe(
    problem: Path, code: str, machine: str, timeout_s: float = 120.0, salt: bytes | None = None
) -> ProbeResult:
    """Compile and call `code` once in a sandboxed worker with a recording device (`salt`: the
    search's secret for the storage contents; keys compare only under the same salt); never raises."""
    t0 = time.monotonic()
    try:
        from kegen.eval.trusted.recording import record_candidate

        rec = record_candidate(problem, code, machine, timeout_s, salt)
        res = ProbeResult(
            rec.status,
            rec.message,
            key=rec.key,
            launches=[
                LaunchSummary(
                    str(x["kernel"]),
                    (int(x["grid"][0]), int(x["grid"][1]), int(x["grid"][2])),
                    str(x["sram_mode"]),
                    bool(x["dual_core"]),
                    str(x["elf"]),
                )
                for x in rec.launches
            ],
            roofline=dict(rec.roofline),
            source_line=rec.source_line,
        )
    except Exception as exc:  # the probe is an optimisation: the candidate is then just evaluated
        res = ProbeResult("failed", f"screening probe failed: {type(exc).__name__}: {str(exc)[:300]}")
    res.duration_s = time.monotonic() - t0
    return res
