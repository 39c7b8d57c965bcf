"""Bench results: per-problem rows, the run's report, JSON/CSV writers and run-to-run comparison."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kegen.bench.metrics import SuiteMetrics, summarize
from kegen.eval.result import json_safe

SCHEMA_VERSION = 1
SEARCH_DONE = "done"
SEARCH_NOT_RUN = "not run"
SEARCH_FAILED = "failed"


@dataclass
class ProblemResult:
    """One problem's outcome: the seed's evaluation and the search's best kernel (a flat CSV row).

    Speedups are baseline time / kernel time; roofline fractions are roofline time / kernel time.
    `best_*` describe the best correct kernel found (the seed itself when the search found nothing
    better or did not run).
    """

    name: str
    op_class: str = "other"
    kind: str = "op"
    dtype: str = "float32"
    seed_status: str = "not run"
    seed_correct: bool = False
    seed_speedup: float | None = None
    seed_roofline: float | None = None
    seed_time_s: float | None = None
    baseline_time_s: float | None = None
    roofline_time_s: float | None = None
    seed_eval_s: float = 0.0
    seed_message: str = ""
    seed_baseline: str = ""
    search_state: str = SEARCH_NOT_RUN
    search_evaluations: int = 0
    search_time_s: float = 0.0
    search_message: str = ""
    best_source: str = "seed"
    best_speedup: float | None = None
    best_roofline: float | None = None
    best_time_s: float | None = None
    best_path: str = ""
    compile_time_s: float | None = None  # torch.compile on the same target (kegen.inductor.baseline)
    compile_host_ops: str = ""  # ops torch.compile left on the host (its time is then incomplete)
    compile_message: str = ""
    target_roofline: float | None = None  # the roofline fraction the best kernel should reach
    evals_to_90: int | None = None  # search evaluations until 90% of the final best speed (seed = 1st)
    best_diagnosis: str = ""  # the best kernel's profile diagnosis: bottleneck, idle PEs, stalls

    @property
    def correct(self) -> bool:
        """Whether kegen has a correct kernel for this problem (the seed or a search result)."""
        return self.seed_correct or self.best_source == "search"

    @property
    def speedup(self) -> float | None:
        return self.best_speedup if self.correct else None

    @property
    def roofline_fraction(self) -> float | None:
        return self.best_roofline if self.correct else None

    @property
    def speedup_vs_compile(self) -> float | None:
        """torch.compile's time / the best correct kernel's time (None when either is missing, or
        when torch.compile left ops on the host so its time is not the whole forward)."""
        if not self.correct or not self.best_time_s or not self.compile_time_s or self.compile_host_ops:
            return None
        return self.compile_time_s / self.best_time_s

    @property
    def speedup_vs_seed(self) -> float | None:
        """The seed's time / the best correct kernel's time (1.0 when the seed is the best)."""
        if not self.seed_correct or not self.correct:
            return None
        if self.seed_time_s and self.best_time_s:
            return self.seed_time_s / self.best_time_s
        if self.best_speedup is not None and self.seed_speedup:
            return self.best_speedup / self.seed_speedup
        return None

    @property
    def target_met(self) -> bool | None:
        """Whether the best correct kernel reaches its roofline target (None: no target or no roofline;
        False: no correct kernel)."""
        if self.target_roofline is None:
            return None
        if not self.correct:
            return False
        frac = self.roofline_fraction
        return None if frac is None else frac >= self.target_roofline

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class BenchReport:
    """A whole bench run: what ran, where, each problem's result and the suite's metrics."""

    suite: str
    target: str
    machine: str
    budget: int
    jobs: int
    started: str
    wall_s: float = 0.0
    baseline: str = ""
    host: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[ProblemResult] = field(default_factory=list)
    summary: SuiteMetrics | None = None

    def finalize(self) -> BenchReport:
        """Compute the suite metrics from the problem rows."""
        self.summary = summarize(self.problems)
        return self

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("problems", "summary")}
        data["schema"] = SCHEMA_VERSION
        data["summary"] = (self.summary or summarize(self.problems)).to_dict()
        data["problems"] = [p.to_dict() for p in self.problems]
        return json_safe(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchReport:
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"bench results have schema {data.get('schema')!r}; this kegen reads schema "
                             f"{SCHEMA_VERSION}: re-run `kegen bench` to produce comparable results")
        known = {f.name for f in fields(cls)} - {"problems", "summary"}
        report = cls(**{k: v for k, v in data.items() if k in known})
        report.problems = [ProblemResult.from_dict(p) for p in data.get("problems", [])]
        report.summary = SuiteMetrics.from_dict(data["summary"]) if data.get("summary") else None
        return report


def write_json(report: BenchReport, path: Path) -> Path:
    """Write the report as JSON (NaN and infinities become null)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return path


def write_csv(report: BenchReport, path: Path) -> Path:
    """Write one row per problem, the columns being ProblemResult's fields plus `correct`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [f.name for f in fields(ProblemResult)] + ["correct"]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for p in report.problems:
            row = p.to_dict()
            row["correct"] = p.correct
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in columns})
    return path


def load_json(path: Path) -> BenchReport:
    """Read a results.json written by `write_json`."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"no bench results at {path}: give a results.json from an earlier "
                                "run") from exc
    return BenchReport.from_dict(data)


@dataclass(frozen=True)
class Change:
    """A difference between two runs that matters: a problem broke or got fixed, or sped up/down."""

    problem: str
    what: str
    before: Any
    after: Any

    @property
    def regression(self) -> bool:
        return self.what in ("became incorrect", "slower")


def compare(previous: BenchReport, current: BenchReport, tolerance: float = 0.05) -> list[Change]:
    """Per-problem changes from `previous` to `current`; speed changes below `tolerance` are ignored."""
    before = {p.name: p for p in previous.problems}
    changes: list[Change] = []
    for p in current.problems:
        old = before.get(p.name)
        if old is None:
            changes.append(Change(p.name, "new problem", None, p.speedup))
            continue
        if old.correct and not p.correct:
            changes.append(Change(p.name, "became incorrect", old.speedup, p.seed_status))
        elif p.correct and not old.correct:
            changes.append(Change(p.name, "became correct", old.seed_status, p.speedup))
        elif p.speedup and old.speedup:
            ratio = p.speedup / old.speedup
            if ratio > 1 + tolerance:
                changes.append(Change(p.name, "faster", old.speedup, p.speedup))
            elif ratio < 1 - tolerance:
                changes.append(Change(p.name, "slower", old.speedup, p.speedup))
    names = {p.name for p in current.problems}
    changes.extend(Change(n, "dropped", before[n].speedup, None) for n in before if n not in names)
    return changes


def format_changes(changes: list[Change]) -> str:
    """Readable lines, regressions first."""
    if not changes:
        return "no changes beyond tolerance"
    lines = []
    for c in sorted(changes, key=lambda c: (not c.regression, c.problem)):
        mark = "REGRESSION " if c.regression else ""
        lines.append(f"{mark}{c.problem}: {c.what} ({_fmt(c.before)} -> {_fmt(c.after)})")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}x"
    return "-" if v is None else str(v)


