"""tools/production_standing.py: the best record per problem, the targets met and the ceiling of the
geomean over the seeds, on synthetic records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tool_module import load_tool


@pytest.fixture(scope="module")
def tool() -> Any:
    return load_tool("production_standing")


def _problem(name: str, target: float, seed: float, best: float, status: str = "ok") -> dict[str, Any]:
    return {"name": name, "op_class": "gemm" if target == 0.8 else "normalization", "seed_status": status,
            "seed_roofline": seed, "best_roofline": best, "best_speedup": best / seed,
            "target_roofline": target, "search_evaluations": 4, "best_time_s": 1e-5}  # fmt: skip


def _record(path: Path, budget: int, problems: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"budget": budget, "problems": problems}))
    return path


def test_the_best_record_per_problem_and_the_ceiling(tool: Any, tmp_path: Path) -> None:
    full = _record(tmp_path / "full.json", 50, [_problem("g", 0.8, 0.25, 0.7), _problem("n", 0.85, 0.5, 0.9)])
    later = _record(
        tmp_path / "later.json", 8, [_problem("g", 0.8, 0.26, 0.82), _problem("n", 0.85, 0.5, 0.6)]
    )
    broken = _record(tmp_path / "broken.json", 8, [_problem("n", 0.85, 0.5, 0.99, status="failed")])
    data = tool.standing([tool.load(p) for p in (full, later, broken)])
    rows = {r["problem"]: r for r in data["rows"]}
    assert rows["g"]["record"] == "later.json" and rows["g"]["met"] and rows["g"]["budget"] == 8
    assert (
        rows["n"]["record"] == "full.json" and rows["n"]["best_roofline"] == 0.9
    )  # a failed seed never wins
    t = data["totals"]
    assert t["gemm_class_met"] == "1/1" and t["memory_bound_met"] == "1/1"
    # each row's own seed: g's (later.json) at 26%, n's (full.json) at 50% of their rooflines
    assert t["ceiling_x_seed"] == pytest.approx((1 / 0.26 * 2) ** 0.5)
    assert t["at_targets_x_seed"] == pytest.approx((0.8 / 0.26 * 0.85 / 0.5) ** 0.5)
    assert t["geomean_x_seed"] == pytest.approx((0.82 / 0.26 * 0.9 / 0.5) ** 0.5)
    text = tool.markdown(data, ["full.json", "later.json"])
    assert "| g | gemm | 82.0% | 80.0% | yes |" in text and f"**{t['ceiling_x_seed']:.2f}x**" in text


def test_a_first_record_with_some_problems_does_not_narrow_the_ceiling(tool: Any, tmp_path: Path) -> None:
    part = _record(tmp_path / "part.json", 30, [_problem("n", 0.85, 0.5, 0.9)])
    full = _record(tmp_path / "full.json", 30, [_problem("g", 0.8, 0.25, 0.7), _problem("n", 0.85, 0.5, 0.8)])
    t = tool.standing([tool.load(p) for p in (part, full)])["totals"]
    assert t["problems"] == 2 and t["ceiling_x_seed"] == pytest.approx((4 * 2) ** 0.5)


def test_a_file_that_is_not_a_record_is_named(tool: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="bad.json: not a record"):
        tool.load(bad)
