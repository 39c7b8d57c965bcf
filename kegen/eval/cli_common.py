"""Arguments and output shared by `kegen eval`, `kegen run` and `kegen profile`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kegen.eval.config import GPU_PROFILES, TARGETS, EvalConfig
from kegen.eval.errors import ProblemError
from kegen.eval.result import EvalResult

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "problem", help="problem file (KernelBench format: Model, get_inputs, get_init_inputs)"
    )
    parser.add_argument("candidate", help="candidate file (class ModelNew calling @triton.jit kernels)")
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="mtia",
        help="mtia (simulated), nvidia or amd (a GPU), cpu (Triton interpreter; development)",
    )
    parser.add_argument(
        "--machine", default=None, help="mtia machine description (default: mtia-2i / KEGEN_MACHINE)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="reproducible seeds from this one (debugging; by default every call gets a secret seed)",
    )
    parser.add_argument(
        "--timing-seed",
        type=int,
        default=None,
        help="time on the draws of this seed, as a search times its candidates (compare kernels on a "
        "jagged or gathering problem on identical inputs; correctness trials stay on secret draws)",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="wall-clock limit in seconds (default 300)"
    )
    parser.add_argument(
        "--memory-mb", type=int, default=None, help="memory limit of the worker (default 8192)"
    )
    parser.add_argument(
        "--allow-op",
        action="append",
        default=[],
        metavar="OP",
        help="torch op the candidate may compute with (aten name, e.g. aten.mm; '*' = any)",
    )
    parser.add_argument("--no-cheat-checks", action="store_true", help="skip the anti-cheat checks")
    parser.add_argument(
        "--gpu-profile",
        choices=GPU_PROFILES,
        default="full",
        help="GPU targets: full (kernel table + ncu, default here), auto (ncu only for a candidate faster "
        "than the best so far: a search's default), timing (no kernel profile)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def config_from_args(args: argparse.Namespace, **extra: Any) -> EvalConfig:
    overrides: dict[str, Any] = {
        "target": args.target,
        "allow_ops": tuple(args.allow_op),
        "check_cheats": not args.no_cheat_checks,
        "gpu_profile": getattr(args, "gpu_profile", "full"),
    }
    for key, value in (
        ("machine", args.machine),
        ("seed", args.seed),
        ("timeout_s", args.timeout),
        ("memory_limit_mb", args.memory_mb),
    ):
        if value is not None:
            overrides[key] = value
    overrides.update({k: v for k, v in extra.items() if v is not None})
    if args.seed is not None:
        overrides["extra"] = {**(overrides.get("extra") or {}), "reproducible": True}
    if getattr(args, "timing_seed", None) is not None:
        overrides["extra"] = {**(overrides.get("extra") or {}), "timing_seed": args.timing_seed}
    return EvalConfig.from_settings(**overrides)


def default_baseline(problem: str, candidate: str, target: str, baseline: str | None) -> str | None:
    """On mtia, a suite problem (`<dir>/problem.py` beside `<dir>/seed.py`) is timed against its seed."""
    if baseline is not None or target != "mtia":
        return baseline
    path = Path(problem)
    seed = path.with_name("seed.py")
    if path.name == "problem.py" and seed.is_file() and seed.resolve() != Path(candidate).resolve():
        return str(seed)
    return None


def report(result: EvalResult, as_json: bool, text: str) -> int:
    if as_json:
        print(json.dumps(result.to_dict()))
    else:
        print(text)
    return EXIT_OK if result.ok else EXIT_FAILED


def problem_error(exc: ProblemError | FileNotFoundError | ValueError, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"status": "problem_error", "message": str(exc)}))
    else:
        print(f"error: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT
