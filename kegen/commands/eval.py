"""`kegen eval PROBLEM CANDIDATE`: verdict, speedups against each baseline and the profile summary."""

from __future__ import annotations

import argparse
import dataclasses

from kegen.eval.cli_common import (
    add_common_arguments,
    config_from_args,
    default_baseline,
    problem_error,
    report,
)
from kegen.eval.errors import ProblemError
from kegen.eval.profile import Profile
from kegen.profiling.render import terminal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--baseline",
        default=None,
        help="a baseline candidate timed in the same run (mtia default: seed.py beside a suite's "
        "problem.py), or 'compile': torch.compile of the reference on the simulated chip (mtia)",
    )
    parser.add_argument("--trials", type=int, default=None, help="correctness trials (default 3)")
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (default by dtype)")
    parser.add_argument("--rtol", type=float, default=None, help="relative tolerance (default by dtype)")
    parser.add_argument(
        "--edge-shapes",
        action="store_true",
        help="also try odd sizes, reported as 'generalises: yes/no' "
        "(the status is judged at the problem's own shapes)",
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the profile")


def run(args: argparse.Namespace) -> int:
    from kegen.eval import evaluate

    compile_baseline = args.baseline == "compile"
    baseline = None if compile_baseline else args.baseline
    try:
        if compile_baseline and args.target != "mtia":
            raise ValueError(
                "--baseline compile is for --target mtia (GPU targets time torch.compile by default)"
            )
        config = config_from_args(
            args,
            trials=args.trials,
            atol=args.atol,
            rtol=args.rtol,
            profile=not args.no_profile,
            edge_shapes=args.edge_shapes or None,
        )
        if compile_baseline:
            config = dataclasses.replace(config, mtia_compile_baseline=True)
        result = evaluate(
            args.problem,
            args.candidate,
            baseline=(
                None
                if compile_baseline
                else default_baseline(args.problem, args.candidate, args.target, baseline)
            ),
            config=config,
        )
    except (ProblemError, FileNotFoundError, ValueError) as exc:
        return problem_error(exc, args.json)
    text = result.verdict_text()
    if result.profile:
        text += "\n" + terminal(Profile.from_dict(result.profile))
    return report(result, args.json, text)
