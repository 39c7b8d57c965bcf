"""`--edge-shapes`: odd-size trials after the regular ones; the answer is `details.generalises`
(yes/no/untested), never the status (a cheat found there still fails the candidate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kegen.eval.errors import CandidateError
from kegen.eval.inputs import InputFactory
from kegen.eval.models import call_reference

if TYPE_CHECKING:
    from kegen.eval.trusted.evaluator import Evaluator
    from kegen.eval.trusted.session import WorkerSession


def edge_trials(ev: Evaluator, factory: InputFactory, ref: Any, session: WorkerSession) -> None:
    """Run the candidate at each edge size the factory gives; record the outcomes in `ev.result`."""
    outcomes: list[dict[str, Any]] = []
    for sizes in factory.edge_sizes():
        seed = ev.seed()
        try:
            call_reference(ref, factory.make(seed, sizes), ev.gpu)
        except Exception as exc:
            outcomes.append({"sizes": sizes, "skipped": f"the reference fails there ({type(exc).__name__})"})
            continue
        ev._last_inputs = inputs = factory.make(seed, sizes)
        try:
            _, cmp = ev.verified_call(
                session, ref, inputs, f"candidate forward (sizes {sizes})", record=False
            )
            outcomes.append({"sizes": sizes, "ok": cmp.ok, "message": cmp.message})
        except CandidateError as exc:
            if exc.status == "cheat_detected":
                raise
            outcomes.append({"sizes": sizes, "ok": False, "message": f"{exc.status}: {exc.message}"})
            session.worker.returncode()
            if exc.status in ("timeout",) or session.worker.returncode() is not None:
                break
    tried = [o for o in outcomes if "ok" in o]
    ev.result["details"]["edge_trials"] = outcomes
    ev.result["details"]["generalises"] = (
        ("yes" if all(o["ok"] for o in tried) else "no") if tried else "untested"
    )
