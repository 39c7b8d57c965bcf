"""Per-source-line attribution: command tags -> Triton source lines (an ncu-like source view).

The compiler numbers every command it emits with a tag (`CommandEvent.tag`, 1-based) and keeps
`tags[tag - 1] = "<ttir op> <file>:<line>:<col>"` in the kernel's metadata; the driver's launch
records carry that list. Each command's unit busy cycles, bytes and waits are summed per line.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kegen.profiling.schema import SourceLine

_POS = re.compile(r"(?P<file>\S+?):(?P<line>\d+):(?P<col>\d+)\s*$")
UNKNOWN_LINE = "<unknown>"


def tag_position(tags: Sequence[str], tag: int) -> tuple[str, int]:
    """(file, line) of command tag `tag` (1-based), or (UNKNOWN_LINE, 0) when it has none."""
    if tag <= 0 or tag > len(tags):
        return UNKNOWN_LINE, 0
    m = _POS.search(str(tags[tag - 1]))
    if m is None:
        return UNKNOWN_LINE, 0
    return m["file"], int(m["line"])


def line_text(file: str, line: int) -> str:
    """The stripped source text of `file:line` ('' when the file cannot be read)."""
    if line <= 0 or file == UNKNOWN_LINE or not Path(file).is_file():
        return ""
    return linecache.getline(file, line).strip()


def attribute_lines(
    commands: Iterable[Any], tags: Sequence[str], kernel: str, into: dict[tuple[str, int], SourceLine]
) -> float:
    """Add each command record's busy cycles, bytes and waits to its source line in `into`.

    `commands` are the timing model's CommandRecords (pe, start, end, event with unit, op, tag,
    bytes_read/bytes_written, and wait_* cycles). Returns the busy cycles added.
    """
    total = 0.0
    for rec in commands:
        ev = getattr(rec, "event", None)
        if ev is None:
            continue
        file, line = tag_position(tags, int(getattr(ev, "tag", 0) or 0))
        key = (file, line)
        row = into.get(key)
        if row is None:
            name = Path(file).name if file != UNKNOWN_LINE else file
            row = into[key] = SourceLine(
                location=f"{name}:{line}" if line else UNKNOWN_LINE,
                line=line,
                text=line_text(file, line),
                kernel=kernel,
            )
        cycles = float(rec.end - rec.start)
        total += cycles
        row.cycles += cycles
        row.commands += 1
        op = f"{ev.unit.name}:{ev.op.name}"
        if op not in row.ops:
            row.ops.append(op)
        for table in (ev.bytes_read, ev.bytes_written):
            for level, n in table.items():
                row.bytes[str(level)] = row.bytes.get(str(level), 0.0) + float(n)
        for reason in ("wait_dependency", "wait_bandwidth", "wait_unit"):  # wait_unit: queued
            v = float(getattr(rec, reason, 0.0) or 0.0)
            if v:
                key_name = {"wait_unit": "queue"}.get(reason, reason.removeprefix("wait_"))
                row.stall_cycles[key_name] = row.stall_cycles.get(key_name, 0.0) + v
    return total


def finish_lines(rows: dict[tuple[str, int], SourceLine], total_cycles: float) -> list[SourceLine]:
    """The rows with their shares, hottest first."""
    out = list(rows.values())
    for r in out:
        r.share = r.cycles / total_cycles if total_cycles > 0 else 0.0
    return sorted(out, key=lambda r: -r.cycles)


def fill_source_text(lines: list[SourceLine], code: str) -> None:
    """Fill the text of lines the profiler could not read (the candidate ran from a sandbox copy)
    from the candidate's own code, by line number."""
    src = code.splitlines()
    for ln in lines:
        if not ln.text and 0 < ln.line <= len(src):
            ln.text = src[ln.line - 1].strip()
