"""`kegen profile PROBLEM CANDIDATE`: the full profile (and, on mtia, a Perfetto trace file).

`--source` adds the per-line attribution (cycles, commands, bytes, waits per Triton source line);
the trace's command events carry the same lines (`DMA_COPY seed.py:19`, args `source`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kegen.eval.cli_common import (
    add_common_arguments,
    config_from_args,
    default_baseline,
    problem_error,
    report,
)
from kegen.eval.errors import ProblemError
from kegen.eval.profile import Profile
from kegen.profiling.render import source_view, terminal
from kegen.profiling.source import fill_source_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--baseline", default=None, help="a baseline candidate to time in the same run")
    parser.add_argument(
        "--trace",
        default=None,
        help="Perfetto trace file to write on mtia (default: CANDIDATE.trace.json in the cwd)",
    )
    parser.add_argument(
        "--ncu", action="store_true", help="on nvidia, also collect ncu metrics (if ncu works)"
    )
    parser.add_argument(
        "--source",
        action="store_true",
        help="print the per-line attribution: cycles, commands, bytes and waits per Triton source line",
    )


def run(args: argparse.Namespace) -> int:
    from kegen.eval import evaluate

    trace = Path(args.trace or f"{Path(args.candidate).stem}.trace.json").resolve()
    try:
        config = config_from_args(args, profile=True, extra={"trace_path": str(trace), "ncu": bool(args.ncu)})
        result = evaluate(
            args.problem,
            args.candidate,
            baseline=default_baseline(args.problem, args.candidate, args.target, args.baseline),
            config=config,
            mode="profile",
        )
    except (ProblemError, FileNotFoundError, ValueError) as exc:
        return problem_error(exc, args.json)
    parts = [result.verdict_text()]
    if result.profile:
        prof = Profile.from_dict(result.profile)
        code = _read(args.candidate)
        fill_source_text(prof.lines, code)
        parts.append(terminal(prof, full=True))
        if args.source:
            parts += ["", "source view (per Triton source line, all launches):", source_view(prof)]
        parts.extend(prof.raw.get("mtia_report_text", []) or [])
        for i, path in enumerate(prof.raw.get("trace_files", []) or []):
            _label_trace(path, prof, i, code)
            parts.append(f"trace written to {path} (open in https://ui.perfetto.dev)")
    return report(result, args.json, "\n".join(parts))


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _label_trace(path: str, prof: Profile, index: int, code: str) -> None:
    """Name the trace's command events by their source line (when the evaluator wrote it without)."""
    if index >= len(prof.launches) or not prof.launches[index].tag_lines:
        return
    from mtia_sim.trace import label_trace_file

    st = prof.launches[index]
    src = code.splitlines()
    labels = {t: f"{st.source_file}:{ln}" for t, ln in enumerate(st.tag_lines, start=1) if ln}
    texts = {t: src[ln - 1].strip() for t, ln in enumerate(st.tag_lines, start=1) if 0 < ln <= len(src)}
    try:
        label_trace_file(path, labels, texts)
    except (OSError, ValueError):
        pass  # the trace stays unlabelled; the profile above has the lines
