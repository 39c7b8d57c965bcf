"""`kegen run PROBLEM CANDIDATE`: run a candidate once on seeded (or given) inputs; print outputs and time."""

from __future__ import annotations

import argparse

from kegen.eval.cli_common import add_common_arguments, config_from_args, problem_error, report
from kegen.eval.errors import ProblemError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--inputs", default=None, help="a torch.save'd list of input tensors to use instead of get_inputs()"
    )


def run(args: argparse.Namespace) -> int:
    from kegen.eval import evaluate

    try:
        config = config_from_args(
            args, profile=False, extra={"inputs_path": args.inputs} if args.inputs else None
        )
        result = evaluate(args.problem, args.candidate, config=config, mode="run")
    except (ProblemError, FileNotFoundError, ValueError) as exc:
        return problem_error(exc, args.json)
    lines = [f"status: {result.status}" + (f" — {result.message}" if result.message else "")]
    if result.source_line:
        lines.append(f"  at {result.source_line}")
    for i, out in enumerate(result.details.get("outputs", [])):
        lines.append(
            f"output {i}: shape {tuple(out['shape'])} {out['dtype']}"
            + (
                f", mean {out['mean']:.6g}, abs max {out['abs_max']:.6g}, first {out['first']}"
                if "mean" in out
                else ""
            )
        )
    if result.candidate_time_s is not None:
        kind = "simulated" if config.target == "mtia" else "measured"
        lines.append(f"time ({kind}): {result.candidate_time_s * 1e6:.2f} us")
    if "matches_reference" in result.details:
        lines.append(
            f"matches reference: {result.details['matches_reference']} "
            f"(max abs error {result.max_abs_error:.3g})"
        )
    return report(result, args.json, "\n".join(lines))
