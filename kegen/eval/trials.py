"""Correctness trials: fresh seeded inputs per call, reference and candidate in both orders, every
cheat check after every call, edge sizes where the problem allows them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kegen.eval import cheats
from kegen.eval.checker import Comparison, compare_outputs, same_values
from kegen.eval.config import EvalConfig
from kegen.eval.errors import CandidateError
from kegen.eval.inputs import InputFactory, clone_all
from kegen.eval.runner import Guards, call_reference

EDGE_SEED_OFFSET = 10_000


@dataclass
class TrialRecord:
    seed: int
    order: str  # "ref_first" | "cand_first" | "edge"
    comparison: Comparison
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass
class TrialsOutcome:
    records: list[TrialRecord]
    first_inputs: list[Any]
    first_ref_out: list[torch.Tensor]
    skipped_edges: list[str] = field(default_factory=list)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.records]

    def worst(self) -> Comparison:
        failing = [r.comparison for r in self.records if not r.comparison.ok]
        pool = failing or [r.comparison for r in self.records]
        return max(pool, key=lambda c: c.max_abs_error)


def _detached(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [o.detach().clone().cpu() for o in outs]


class TrialRunner:
    """Runs the correctness trials of one candidate against one reference."""

    def __init__(
        self,
        factory: InputFactory,
        ref_model: Any,
        cand_model: Any,
        guards: Guards,
        config: EvalConfig,
        gpu: bool,
    ) -> None:
        self.factory, self.ref, self.cand = factory, ref_model, cand_model
        self.guards, self.config, self.gpu = guards, config, gpu
        self.history: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
        self.keep_alive: list[Any] = []  # earlier inputs stay allocated: new inputs get new addresses

    def run(self) -> TrialsOutcome:
        cfg = self.config
        n = cfg.trials if (cfg.trials >= 2 or not cfg.check_cheats) else 2
        records: list[TrialRecord] = []
        first: tuple[list[Any], list[torch.Tensor]] | None = None
        for t in range(n):
            seed = cfg.seed + t
            order = "ref_first" if t % 2 == 0 else "cand_first"
            rec, inputs, ref_out = self.one_trial(seed, order)
            records.append(rec)
            if first is None:
                first = (inputs, ref_out)
        outcome = TrialsOutcome(records, first[0], first[1]) if first else TrialsOutcome(records, [], [])
        if cfg.edge_shapes:
            for sizes in self.factory.edge_sizes():
                rec_or_skip = self.edge_trial(cfg.seed + EDGE_SEED_OFFSET, sizes)
                if isinstance(rec_or_skip, str):
                    outcome.skipped_edges.append(rec_or_skip)
                else:
                    records.append(rec_or_skip)
        return outcome

    def one_trial(
        self, seed: int, order: str, sizes: dict[str, int] | None = None
    ) -> tuple[TrialRecord, list[Any], list[torch.Tensor]]:
        inputs_r = self.factory.make(seed, sizes)
        inputs_c = self.factory.make(seed, sizes)
        pristine_r, pristine_c = clone_all(inputs_r), clone_all(inputs_c)
        what = f"candidate forward (seed {seed}" + (f", sizes {sizes})" if sizes else ")")
        if order == "cand_first":
            cand_out = self.guards.call(self.cand, inputs_c, what)
            ref_out = call_reference(self.ref, inputs_r, self.gpu)
        else:
            ref_out = call_reference(self.ref, inputs_r, self.gpu)
            cand_out = self.guards.call(self.cand, inputs_c, what)
        if self.config.check_cheats:
            self.cheat_checks(inputs_r, inputs_c, pristine_r, pristine_c, ref_out, cand_out)
        comparison = compare_outputs(ref_out, cand_out, self.config)
        self.history.append((_detached(ref_out), _detached(cand_out)))
        self.keep_alive.append((inputs_r, inputs_c))
        return TrialRecord(seed, order, comparison, dict(sizes or {})), pristine_r, ref_out

    def cheat_checks(
        self,
        inputs_r: list[Any],
        inputs_c: list[Any],
        pristine_r: list[Any],
        pristine_c: list[Any],
        ref_out: list[torch.Tensor],
        cand_out: list[torch.Tensor],
    ) -> None:
        ref_mut = cheats.mutated_inputs(pristine_r, inputs_r)
        checks = (
            cheats.check_aliasing(
                cand_out, inputs_c, ref_out, inputs_r, cheats.reference_aliases(ref_out, inputs_r)
            ),
            cheats.check_mutation(pristine_c, inputs_c, ref_mut),
            cheats.check_cached(self.history, _detached(ref_out), _detached(cand_out), same_values),
            cheats.check_precision(ref_out, cand_out),
        )
        for msg in checks:
            if msg:
                raise CandidateError("cheat_detected", msg)

    def edge_trial(self, seed: int, sizes: dict[str, int]) -> TrialRecord | str:
        """A trial at other sizes, or why it was skipped (the reference itself fails there)."""
        try:
            call_reference(self.ref, self.factory.make(seed, sizes), self.gpu)
        except Exception as exc:
            return f"edge sizes {sizes} skipped: the reference fails there ({type(exc).__name__})"
        rec, _, _ = self.one_trial(seed, "edge", sizes)
        return rec


def verdict(outcome: TrialsOutcome) -> CandidateError | None:
    """None if every trial passed; else INCORRECT, or CHEAT_DETECTED if correctness depends on order."""
    failing = [r for r in outcome.records if not r.comparison.ok]
    if not failing:
        return None
    passed_after_ref = any(r.comparison.ok for r in outcome.records if r.order == "ref_first")
    failed_before_ref = any(not r.comparison.ok for r in outcome.records if r.order == "cand_first")
    if passed_after_ref and failed_before_ref and all(r.order != "ref_first" for r in failing):
        return CandidateError(
            "cheat_detected",
            "candidate is correct only when it runs after the reference "
            "(it returns memory the reference left behind): " + failing[0].comparison.message,
        )
    first = failing[0]
    where = f" at edge sizes {first.sizes}" if first.sizes else f" (seed {first.seed})"
    return CandidateError("incorrect", first.comparison.message + where)
