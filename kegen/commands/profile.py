"""`kegen profile PROBLEM CANDIDATE`: the full profile (and, on mtia, a Perfetto trace file)."""

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
        parts.append(prof.format_text(full=True))
        parts.extend(prof.raw.get("mtia_report_text", []) or [])
        for path in prof.raw.get("trace_files", []) or []:
            parts.append(f"trace written to {path} (open in https://ui.perfetto.dev)")
    return report(result, args.json, "\n".join(parts))
