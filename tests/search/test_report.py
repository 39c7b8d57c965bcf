"""`kegen report`: text summary, HTML with plots, from a run directory or a run id."""

from __future__ import annotations

from kegen.cli import main
from kegen.search.config import EvalSliceConfig, PolicyConfig, SearchConfig, StoreConfig, TerminationConfig
from kegen.search.loop import run_search
from tests.search.search_helpers import EXAMPLES, fake_evolve_argv


def test_report_renders_text_and_html(tmp_path, store, capsys) -> None:
    cfg = SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=EXAMPLES / "softmax" / "seed.py",
        out_dir=tmp_path / "run",
        policy=PolicyConfig(name="greedy"),
        termination=TerminationConfig(max_evaluations=5),
        eval=EvalSliceConfig(jobs=0, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "search.db", warm_start=False),
        progress=False,
    )
    r = run_search(cfg, store)
    assert main(["report", str(r.out_dir)]) == 0
    out = capsys.readouterr().out
    assert f"run {r.run_id}" in out and "search tree:" in out and "fitness over time" in out
    assert f"best: node {r.best.id}, {r.best.fitness:.3f}x" in out and "-bound" in out
    html = (r.out_dir / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and r.run_id in html
    for png in ("fitness.png", "tree.png", "roofline.png"):
        assert (r.out_dir / png).read_bytes()[:4] == b"\x89PNG"
    assert main(["report", r.run_id, "--db", str(tmp_path / "search.db"), "--text-only"]) == 0
    assert main(["report", "no-such-run", "--db", str(tmp_path / "search.db")]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_evolve_cli_prints_summary_and_speedup(tmp_path, capsys) -> None:
    argv = fake_evolve_argv("vector_add", tmp_path / "db.sqlite", tmp_path / "run", 4, "--policy", "greedy")
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "best speedup found:" in out
        and "node parent verdict" in out
        and (tmp_path / "run" / "best.py").is_file()
    )


def test_evolve_cli_errors_are_messages(tmp_path, capsys) -> None:
    assert main(["evolve", str(tmp_path / "missing.py"), "--db", str(tmp_path / "db.sqlite")]) == 1
    assert "does not exist" in capsys.readouterr().err
