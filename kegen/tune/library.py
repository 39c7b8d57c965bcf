"""The kernel library: measurements and winners stored by (kernel source hash, shapes, target,
machine), so tuning the same model again evaluates nothing unless asked to retune."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def library_key(kind: str, source: str, shapes: Any, target: str, machine: str) -> str:
    """`kind` (compile, eager, search, verify) + the sources' hash + shapes + target + machine."""
    blob = json.dumps([kind, source_hash(source), shapes, target, machine], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class KernelLibrary:
    """A JSON file of entries; written atomically after every put (a killed run loses nothing stored)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            self.entries = json.loads(self.path.read_text() or "{}")

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.entries[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.entries, indent=1))
        tmp.replace(self.path)
