"""The `--executor/--ray-address` options shared by `kegen evolve` and `kegen bench`."""

from __future__ import annotations

import argparse

from kegen.executor.base import EXECUTORS


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--executor {local,ray}` and `--ray-address ADDR`."""
    parser.add_argument(
        "--executor",
        default="local",
        choices=EXECUTORS,
        help="where evaluations run: local worker processes (--jobs of them) or a Ray cluster "
        "(needs kegen[ray]; --jobs then caps evaluations in flight, default the cluster's size)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster to use with --executor ray, e.g. 127.0.0.1:6379 (default: $RAY_ADDRESS, "
        "else a Ray started on this machine)",
    )


def check_executor_arguments(args: argparse.Namespace) -> None:
    """Raise ValueError for option combinations that make no sense."""
    if args.ray_address and args.executor != "ray":
        raise ValueError("--ray-address needs --executor ray")
