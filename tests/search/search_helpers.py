"""Helpers the search tests import (kept out of conftest.py: several test folders have a conftest)."""

from __future__ import annotations

from pathlib import Path

from kegen.search.store import GraphStore

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "kegen" / "examples"


def new_run(store: GraphStore, problem_path: str = "p.py") -> str:
    """A fresh run (target mtia, machine mtia-2i, empty config) in `store`; its id."""
    return store.create_run(
        problem_path=problem_path,
        problem_key="k",
        target="mtia",
        machine="mtia-2i",
        seed_hash=None,
        config={},
        out_dir=None,
    )


def fake_evolve_argv(example: str, db: Path, out: Path, budget: int, *extra: str) -> list[str]:
    """`kegen evolve` arguments for kegen/examples/EXAMPLE scored by tests/search/fake_eval.py: no
    worker processes, no progress bar, store `db`, output folder `out`, then `extra`."""
    return [
        "evolve",
        str(EXAMPLES / example / "problem.py"),
        "--seed",
        str(EXAMPLES / example / "seed.py"),
        "--budget",
        str(budget),
        "--jobs",
        "0",
        "--db",
        str(db),
        "--out",
        str(out),
        "--no-progress",
        "--evaluator",
        "tests.search.fake_eval:evaluate",
        *extra,
    ]
