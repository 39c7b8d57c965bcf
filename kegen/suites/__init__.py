"""Benchmark suites: folders of KernelBench-style problems, each with a seed Triton candidate.

    from kegen.suites import find_suite
    suite = find_suite("default")            # a suite shipped with kegen, or a folder path
    for p in suite.problems: p.problem_path, p.seed_path, p.op_class

A suite folder holds `<problem>/problem.py` + `<problem>/seed.py` per problem and, optionally, a
`suite.toml` that lists the problems (in order) with their `op_class`, `kind` ("op" or "fusion"),
`dtype` and `target_roofline` (the roofline fraction the best kernel should reach; by op class when
absent, see `target_roofline_for`). Without `suite.toml`, every sub-folder that has both files is a
problem.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUITES_DIR = Path(__file__).resolve().parent
SUITE_FILE = "suite.toml"
PROBLEM_FILE = "problem.py"
SEED_FILE = "seed.py"
KINDS = ("op", "fusion")
# Roofline targets (issue 18): GEMM-class kernels >= 80% of their roofline, memory-bound ones >= 85%.
GEMM_CLASSES = ("gemm", "attention", "convolution", "interaction")
GEMM_TARGET = 0.80
MEMORY_TARGET = 0.85


def target_roofline_for(op_class: str) -> float:
    """The default roofline target of an op class: GEMM-class 0.80, everything else (memory-bound) 0.85."""
    return GEMM_TARGET if op_class in GEMM_CLASSES else MEMORY_TARGET


class SuiteError(ValueError):
    """A suite that cannot be found or is malformed; the message says what to fix."""


@dataclass(frozen=True)
class SuiteProblem:
    """One problem of a suite: where its files are and how it is classified."""

    name: str
    folder: Path
    op_class: str = "other"
    kind: str = "op"
    dtype: str = "float32"
    target_roofline: float | None = None

    @property
    def target(self) -> float:
        """The roofline fraction this problem's best kernel should reach (declared, else by op class)."""
        if self.target_roofline is not None:
            return self.target_roofline
        return target_roofline_for(self.op_class)

    @property
    def problem_path(self) -> Path:
        return self.folder / PROBLEM_FILE

    @property
    def seed_path(self) -> Path:
        return self.folder / SEED_FILE


@dataclass(frozen=True)
class Suite:
    """A named, ordered collection of problems."""

    name: str
    root: Path
    problems: tuple[SuiteProblem, ...]
    description: str = ""

    def select(self, names: list[str] | None) -> Suite:
        """The suite restricted to `names` (in the suite's order); all of it when `names` is empty."""
        if not names:
            return self
        known = {p.name for p in self.problems}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SuiteError(f"suite {self.name!r} has no problem(s) {', '.join(unknown)}; "
                             f"it has: {', '.join(p.name for p in self.problems)}")
        wanted = set(names)
        return Suite(self.name, self.root, tuple(p for p in self.problems if p.name in wanted),
                     self.description)


def list_suites() -> list[str]:
    """Names of the suites shipped with kegen (folders beside this module with a suite.toml)."""
    return sorted(d.name for d in SUITES_DIR.iterdir() if (d / SUITE_FILE).is_file())


def find_suite(name_or_path: str | Path) -> Suite:
    """The suite named `name_or_path` (shipped with kegen) or stored in that folder."""
    path = Path(name_or_path)
    if path.is_dir():
        return load_suite(path)
    shipped = SUITES_DIR / str(name_or_path)
    if isinstance(name_or_path, str) and "/" not in name_or_path and shipped.is_dir():
        return load_suite(shipped)
    raise SuiteError(f"no suite {str(name_or_path)!r}: give the name of a shipped suite "
                     f"({', '.join(list_suites()) or 'none found'}) or a folder of "
                     "<problem>/problem.py + seed.py")


def load_suite(root: Path) -> Suite:
    """Read a suite folder (with or without suite.toml) and check every problem's files exist."""
    root = root.resolve()
    manifest = root / SUITE_FILE
    if manifest.is_file():
        try:
            data = tomllib.loads(manifest.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise SuiteError(f"{manifest} is not valid TOML: {exc}") from exc
        entries = data.get("problem", [])
        problems = tuple(_problem_from_entry(root, entry, i) for i, entry in enumerate(entries))
        name = str(data.get("name", root.name))
        description = str(data.get("description", ""))
    else:
        problems = tuple(SuiteProblem(d.name, d) for d in sorted(root.iterdir())
                         if (d / PROBLEM_FILE).is_file() and (d / SEED_FILE).is_file())
        name, description = root.name, ""
    if not problems:
        raise SuiteError(f"suite folder {root} has no problems: add <problem>/problem.py and "
                         f"<problem>/seed.py folders, or [[problem]] entries to {SUITE_FILE}")
    names = [p.name for p in problems]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SuiteError(f"{manifest} lists problem(s) {', '.join(dupes)} more than once")
    for p in problems:
        for f in (p.problem_path, p.seed_path):
            if not f.is_file():
                raise SuiteError(f"suite {name!r}: problem {p.name!r} lacks {f}")
    return Suite(name=name, root=root, problems=problems, description=description)


def _problem_from_entry(root: Path, entry: dict[str, Any], index: int) -> SuiteProblem:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{root / SUITE_FILE}: [[problem]] entry {index + 1} needs a name = \"<folder>\"")
    kind = str(entry.get("kind", "op"))
    if kind not in KINDS:
        raise SuiteError(f"{root / SUITE_FILE}: problem {name!r} has kind {kind!r}; "
                         f"use one of {', '.join(KINDS)}")
    folder = root / str(entry.get("folder", name))
    target = entry.get("target_roofline")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float)
                               or not 0 < target <= 1):
        raise SuiteError(f"{root / SUITE_FILE}: problem {name!r} has target_roofline {target!r}; "
                         "give a fraction of the roofline in (0, 1], e.g. 0.8")
    return SuiteProblem(name=name, folder=folder, op_class=str(entry.get("op_class", "other")), kind=kind,
                        dtype=str(entry.get("dtype", "float32")),
                        target_roofline=float(target) if target is not None else None)
