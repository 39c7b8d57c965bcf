"""Template drafts against Inductor's drafts of the same problems, on the simulated MTIA (D70).

    .venv/bin/python tools/bench_template_audit.py [--problems DIR_OR_FILE ...] [--out OUT]

Every problem kegen's templates draft is evaluated twice (`kegen.eval.evaluate`, one trial, seed 1):
the template draft (`drafting.analyze`) and Inductor's draft (`inductor.draft.draft_from_inductor`).
A template draft slower than Inductor's costs every drafted search, and every `kegen tune` group
search, one evaluation for nothing; the ratio column (Inductor / template) finds them. Writes OUT.json
(one row per problem) and OUT.md; prints one JSON line per problem as it goes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ("tools/search_probes", "kegen/suites/default", "tools/draft_problems")


def problems(paths: list[str]) -> list[Path]:
    """Problem files under `paths` (a suite directory's */problem.py, or *.py files)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            out.append(p)
        elif list(p.glob("*/problem.py")):
            out += sorted(p.glob("*/problem.py"))
        else:
            out += sorted(q for q in p.glob("*.py") if q.name != "__init__.py")
    return out


def audit(path: Path) -> dict[str, Any] | None:
    """The row of one problem, or None where no template drafts it."""
    from kegen.eval import EvalConfig, evaluate
    from kegen.inductor.draft import draft_from_inductor
    from kegen.search.operators.drafting import analyze

    a = analyze(path)
    if a.source is None:
        return None
    cfg = EvalConfig(target="mtia", seed=1, trials=1)
    row: dict[str, Any] = {"problem": str(path), "op_class": a.op_class}
    for name, source in (("template", lambda: a.source), ("inductor", lambda: draft_from_inductor(path)[0])):
        try:
            r = evaluate(str(path), source(), config=cfg)
            row[name] = r.candidate_time_s if r.ok else f"{r.status}: {(r.message or '')[:80]}"
        except Exception as exc:  # noqa: BLE001 - a row per problem, whatever its drafts do
            row[name] = f"{type(exc).__name__}: {exc}"[:120]
    t, i = row.get("template"), row.get("inductor")
    row["inductor_over_template"] = i / t if isinstance(t, float) and isinstance(i, float) else None
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    def us(v: Any) -> str:
        return f"{v * 1e6:.1f}" if isinstance(v, float) else str(v)[:40]

    lines = [
        "# Template drafts against Inductor's drafts (mtia-2i, simulated)",
        "",
        "Written by `tools/bench_template_audit.py`. Times in us of one forward; ratio = Inductor's draft"
        " over the template draft (below 1: the template is slower).",
        "",
        "| problem | op class | template us | Inductor us | ratio |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r.get("inductor_over_template")
        path = Path(r["problem"])
        name = path.parent.name if path.name == "problem.py" else path.stem
        lines.append(
            f"| {name} | {r['op_class']} | {us(r.get('template'))} | {us(r.get('inductor'))} | "
            + (f"{ratio:.2f}" if ratio else "-")
            + " |"
        )
    ratios = [r["inductor_over_template"] for r in rows if r.get("inductor_over_template")]
    slower = sum(1 for x in ratios if x < 0.95)
    lines += ["", f"{len(rows)} problems drafted from templates; {slower} of {len(ratios)} below 0.95x."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*", default=list(DEFAULT))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "template_audit_mtia",
                    help="output path without suffix (default docs/results/template_audit_mtia)")  # fmt: skip
    args = ap.parse_args()
    rows = []
    for path in problems(args.problems):
        row = audit(path)
        if row is not None:
            print(json.dumps(row), flush=True)
            rows.append(row)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows))


if __name__ == "__main__":
    main()
