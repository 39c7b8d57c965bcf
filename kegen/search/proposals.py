"""Children written in threads while evaluations run: the pool of proposal workers.

An operator that declares `concurrent` (the LLM operator: its time is spent waiting on a server)
gets `parallel` proposals in flight at once (default: one per evaluation slot); each finished one
is handed back to the search driver, which stores it and submits its evaluation. The offline
operator keeps writing children inline, one at a time, so its searches stay reproducible.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from kegen.search.operators import Operator, OperatorContext, Proposal

Written = tuple[Any, OperatorContext, Proposal]  # (the policy's selection, the context, the child)


class ProposalPool:
    """Proposal futures keyed to the selection and context each was written for."""

    def __init__(self, operator: Operator, workers: int) -> None:
        self.operator = operator
        self.workers = max(workers, 1)
        self.pending: dict[Future[Proposal], tuple[Any, OperatorContext]] = {}
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            self.workers, thread_name_prefix="kegen-propose"
        )

    def __len__(self) -> int:
        return len(self.pending)

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.workers

    def submit(self, selection: Any, ctx: OperatorContext) -> None:
        """Start writing a child of `ctx.parent` in a worker thread."""
        if self._pool is None:
            raise RuntimeError("the proposal pool is closed")
        self.pending[self._pool.submit(self.operator.propose, ctx)] = (selection, ctx)

    def collect(self, done: set[Future[Any]] | list[Future[Any]]) -> list[Written]:
        """The proposals among `done` (futures of any kind), removed from the pool."""
        out: list[Written] = []
        for fut in done:
            if fut not in self.pending:
                continue
            sel, ctx = self.pending.pop(fut)
            try:
                proposal = fut.result()
            except Exception as exc:  # the operator broke: the child fails, the search goes on
                proposal = Proposal(None, f"operator failed: {exc}", self.operator.name, error=str(exc))
            out.append((sel, ctx, proposal))
        return out

    def finish(self, abandon: bool) -> list[Written]:
        """Wait for every proposal in flight; with `abandon` their calls are cancelled first (what
        they spent is still returned, to be accounted). Closes the pool."""
        if abandon:
            self.operator.cancel()
        out: list[Written] = []
        while self.pending:
            done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
            out += self.collect(done)
        self.close(wait=True)
        return out

    def close(self, wait: bool = False) -> None:
        """Stop at once (an interrupted search): cancel calls in flight, start nothing more."""
        if self._pool is None:
            return
        if not wait:
            self.operator.cancel()
        self._pool.shutdown(wait=wait, cancel_futures=True)
        self._pool = None
