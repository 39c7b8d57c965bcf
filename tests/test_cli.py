"""The `kegen` command line: help, version, and unbuilt subcommands."""

import subprocess
import sys

from kegen import __version__
from kegen.cli import SUBCOMMANDS, main


def test_help_lists_the_eight_subcommands(capsys) -> None:
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for name in ("lower", "run", "profile", "eval", "evolve", "bench", "report", "kb"):
        assert name in out
        assert SUBCOMMANDS[name].split()[0] in out


def test_version_prints_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "kegen", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def test_settings_read_environment(monkeypatch) -> None:
    from kegen.settings import load_settings

    monkeypatch.setenv("KEGEN_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("KEGEN_LLM_MODELS", "a,b")
    monkeypatch.setenv("KEGEN_EVAL_TRIALS", "5")
    s = load_settings()
    assert s.llm.base_url == "http://127.0.0.1:9/v1"
    assert s.llm.models == ("a", "b")
    assert s.eval.trials == 5


def test_settings_reject_bad_numbers(monkeypatch) -> None:
    import pytest

    from kegen.settings import load_settings

    monkeypatch.setenv("KEGEN_EVAL_TRIALS", "many")
    with pytest.raises(ValueError, match="KEGEN_EVAL_TRIALS"):
        load_settings()
