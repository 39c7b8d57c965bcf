"""Reports of search runs: a text summary, matplotlib plots and one HTML page.

store, run_id, run_dir = locate_run("kegen-runs/RUN")
print(text_report(store, run_id)); write_report(store, run_id, run_dir)
"""

from __future__ import annotations

import json
from pathlib import Path

from kegen.report.html import write_report
from kegen.search.store import GraphStore
from kegen.settings import load_settings


def locate_run(run: str, db: Path | None = None) -> tuple[GraphStore, str, Path]:
    """(store, run id, run directory) from a run directory (run.json) or a run id."""
    path = Path(run)
    if path.is_dir():
        meta_path = path / "run.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{path} has no run.json; pass a run directory written by kegen evolve")
        meta = json.loads(meta_path.read_text())
        store = GraphStore(db or Path(meta["db"]))
        return store, meta["run_id"], path
    store = GraphStore(db or load_settings().paths.home / "search.db")
    r = store.get_run(run)
    return store, r.id, Path(r.out_dir or ".")


__all__ = ["locate_run", "write_report"]
