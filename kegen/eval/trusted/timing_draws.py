"""Which inputs an mtia evaluation times (docs/DECISIONS.md D49).

The simulator's time of a call depends on the shapes and the integer contents of its inputs (the
offsets and indices of a jagged or gathering problem), not on the floating-point values. So:

- By default the timed samples are the verified trial calls, each on a fresh secret draw.
- With `EvalConfig.extra["timing_seed"]` (a search sets one secret seed per run) the samples are
  timed on the draws of that seed (`timing_seed + i`), the same for every candidate of the run: a
  variable-input problem's candidates are then compared on identical inputs, and the seed's time
  per draw is memoised across them. A trial call with the same input fingerprint as a timing draw
  stands in for it (a fixed-shape problem needs no extra call). Correctness trials stay on fresh
  draws either way, so a lineage of candidates is never checked on the same inputs only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kegen.eval.inputs import InputFactory
from kegen.eval.trusted.memo import input_fingerprint

if TYPE_CHECKING:
    from kegen.eval.trusted.evaluator import Evaluator
    from kegen.eval.trusted.session import CallResult, WorkerSession


def timing_draws(ev: Evaluator, factory: InputFactory, runs: int) -> list[list[Any]] | None:
    """The run's fixed timing draws, or None where the evaluation has no timing seed."""
    seed = ev.cfg.extra.get("timing_seed")
    if seed is None:
        return None
    return [factory.make(int(seed) + i) for i in range(runs)]


def draws(ev: Evaluator, factory: InputFactory, n: int) -> list[list[Any]]:
    """`n` input sets to time: the run's timing draws, else fresh secret ones (GPU and cpu targets,
    whose baselines are measured once per process on the same sets as a run's candidates)."""
    return timing_draws(ev, factory, n) or [factory.make(ev.seed()) for _ in range(n)]


def time_mtia(
    ev: Evaluator, factory: InputFactory, ref: Any, session: WorkerSession, runs: int
) -> tuple[list[float], CallResult | None]:
    """`runs` device times of verified calls and the last call (module doc); each sample's inputs
    go to `ev.sample_inputs`, in order, for its roofline (D47) and the seed's time (D49)."""
    pool = ev.verified_trials()
    samples: list[float] = []
    last: CallResult | None = None

    def take(res: CallResult, inputs: list[Any]) -> None:
        nonlocal last
        samples.append(ev.device_seconds(res))
        ev.sample_inputs.append(inputs)
        last = res

    fixed = timing_draws(ev, factory, runs)
    if fixed is None:  # fresh draws: the device timed every verified trial call, those are samples
        for res, used in pool[:runs]:
            take(res, used)
        for inputs in draws(ev, factory, runs - len(samples)):
            take(ev.timed_call(session, ref, inputs), inputs)
        return samples, last
    prints = [input_fingerprint(used) for _, used in pool]
    for draw in fixed:
        wanted = input_fingerprint(draw)
        match = next((i for i, p in enumerate(prints) if p == wanted), None)
        if match is None:
            take(ev.timed_call(session, ref, draw), draw)
        else:
            prints.pop(match)
            take(*pool.pop(match))
    return samples, last
