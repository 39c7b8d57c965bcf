"""Verification of the tuned model against eager at every variant with fresh random inputs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kegen.tune.library import KernelLibrary
from kegen.tune.problems import Counter, Measured, measure


@dataclass
class Verdict:
    variant: int
    ok: bool
    time_s: float | None
    profile: dict[str, Any]
    uninstalled: str = ""  # why a winner was taken out (it broke this variant)


def fresh_seed() -> int:
    """An evaluator seed no search used: inputs the winners were never selected on."""
    return random.SystemRandom().randrange(10_000, 2**31)


def verify_variant(
    k: int,
    problem: Path,
    winner: str | None,
    inductor: str,
    target: str,
    machine: str,
    lib: KernelLibrary,
    counter: Counter,
    shapes: Any,
    seed: int,
    retune: bool = False,
) -> tuple[Verdict, str]:
    """Check the installed candidate (the winner, else Inductor's draft) against eager; a winner
    that fails is uninstalled and Inductor's draft checked instead. Returns the verdict and the
    source that stays installed."""
    source = winner or inductor
    m: Measured = measure(problem, source, target, machine, lib, counter, "verify", shapes, seed, retune)
    if m.ok or winner is None:
        return Verdict(
            k, m.ok, m.time_s, m.profile, "" if m.ok else f"Inductor's draft fails: {m.message}"
        ), source
    back = measure(problem, inductor, target, machine, lib, counter, "verify", shapes, seed, retune)
    why = f"winner uninstalled at variant {k}: {m.message[:200]}"
    return Verdict(k, back.ok, back.time_s, back.profile, why), inductor
