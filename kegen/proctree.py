"""The process tree as Linux's /proc shows it: one reader for the sandbox (resident memory of a
worker's tree), the executor (killing a worker's descendants) and the zygote (reaping its orphans)."""

from __future__ import annotations

import os

__all__ = ["ProcessTable", "children_of", "descendants", "process_table"]

ProcessTable = dict[int, tuple[int, int]]


def process_table() -> ProcessTable:
    """pid -> (parent pid, resident KiB) for every live process; {} where /proc is absent."""
    table: ProcessTable = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                # the command name (field 2) may hold spaces and parentheses: parse after the last ')'
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), int(fields[21]) * page_kib)
    return table


def children_of(pid: int, table: ProcessTable | None = None) -> list[int]:
    """The live direct children of `pid`."""
    table = table if table is not None else process_table()
    return [p for p, (ppid, _) in table.items() if ppid == pid]


def descendants(root: int, table: ProcessTable | None = None) -> list[int]:
    """Every live descendant of `root`, parents before their children."""
    table = table if table is not None else process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
