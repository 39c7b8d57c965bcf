"""The search driver: select → write → evaluate (worker processes) → record → learn → repeat.

Nodes are written to the store before they are evaluated, and evaluations are recorded as they complete,
so `resume` continues a killed search: pending nodes are evaluated (not rewritten), done ones never again.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.eval.request import EvalRequest
from kegen.executor import (
    INFRA_STATUS,
    EvalExecutor,
    ExecutorSpec,
    FileRef,
    InfrastructureError,
    make_executor,
)
from kegen.search.config import SearchConfig
from kegen.search.fitness import Outcome, evaluate_task, load_evaluator
from kegen.search.operators import ContextBuilder, Operator, Proposal, make_operator
from kegen.search.operators.context import OperatorContext, ProblemInfo, load_knowledge_base
from kegen.search.policies import Policy, TreeView, make_policy
from kegen.search.proposals import ProposalPool
from kegen.search.screening import Screening, ScreeningConfig
from kegen.search.setup import start_run
from kegen.search.store import GraphStore, Node
from kegen.search.termination import SearchProgress, Termination

MAX_FAILED_PROPOSALS = 25
# Python 3.11's ast module keeps its recursion depth per interpreter, not per thread: two searches in
# threads of one process (the recorder's --problems-at-once) parsing at once fail with "SystemError:
# AST constructor recursion depth mismatch". Building contexts and writing children take this lock.
AST_LOCK = threading.RLock()
UNCHARGED = "no_candidate"  # metrics key of a child with no code: it costs no evaluation
NO_CANDIDATE = ("no_code", "invalid_code")  # verdicts of such children
MIN_PROPOSAL_S = 3.0  # no concurrent (LLM) proposal starts with less of the time limit left


@dataclass
class SearchResult:
    """How a search ended and where its results are."""

    run_id: str
    db: Path
    out_dir: Path
    stop_reason: str
    root: Node
    best: Node | None
    evaluations: int
    elapsed_s: float
    top: list[Node] = field(default_factory=list)
    screening: dict[str, Any] = field(default_factory=dict)  # counts, evals_to_90 (kegen.search.screening)

    @property
    def best_speedup(self) -> float:
        return self.best.fitness if self.best else 0.0


class SearchDriver:
    """One search run over a `GraphStore`."""

    def __init__(
        self, config: SearchConfig, store: GraphStore | None = None, executor: EvalExecutor | None = None
    ) -> None:
        self.config = config
        self.executor = executor  # None: the run makes (and shuts down) its own from config.eval
        self.store = store or GraphStore(config.store.db)
        self.problem_path = Path(config.problem).resolve()
        if not self.problem_path.is_file():
            raise FileNotFoundError(f"problem file {config.problem} does not exist")
        self.source = self.problem_path.read_text()
        self.policy: Policy = make_policy(config.policy, _rng(config.rng_seed))
        self.operator: Operator = make_operator(config.operator, seed=config.rng_seed)
        self.termination = Termination(config.termination)
        self.evaluator = load_evaluator(config.eval.evaluator)  # handed to the executor as a callable
        self.screening = Screening(  # probes candidates before simulating them (kegen.search.screening)
            ScreeningConfig(), target=config.eval.target, evaluator=config.eval.evaluator,
            budget=config.termination.max_evaluations,
        )  # fmt: skip
        self.progress = SearchProgress()
        self.exhausted: set[int] = set()
        self.inflight: dict[Future[Any], tuple[int, Proposal | None, float]] = {}
        # children judged before their parent: (proposal, fitness) to observe once the parent is
        self.unjudged_parent: dict[int, list[tuple[Proposal, float]]] = {}
        self.proposing: ProposalPool | None = None  # concurrent operators write children in threads
        self._t0 = time.perf_counter()
        self.bar: Any = None
        self.last_verdict = "-"
        self.failed_in_a_row = 0
        self.reference_error: str | None = None

    # ---- the loop -------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        c = self.config
        t_start = time.perf_counter()
        started = start_run(c, self.store, self.problem_path, self.source)
        # the time limit counts the search, not the drafting of its starting nodes (the seed, other
        # drafts, torch.compile's code on a GPU: tens of seconds of Inductor autotuning there)
        t0 = self._t0 = time.perf_counter()
        run_id, out_dir, baseline = started.run_id, started.out_dir, started.baseline
        self.op_class, self.op_summary = started.op_class, started.op_summary
        self.run_id, self.out_dir, self.baseline = run_id, out_dir, baseline
        self.eval_overrides = started.eval_overrides()  # the run's timing draws (D49)
        problem = ProblemInfo(
            path=self.problem_path,
            source=self.source,
            op_class=self.op_class,
            op_summary=self.op_summary,
            target=c.eval.target,
            machine=c.eval.machine,
        )
        kb = load_knowledge_base() if c.operator.kb_budget_chars > 0 else None
        self.builder = ContextBuilder(self.store, run_id, problem, c.operator, kb)
        self._restore_progress()
        resumed = self._replay_learning()
        executor = self.executor or make_executor(
            ExecutorSpec(c.eval.executor, c.eval.jobs, c.eval.ray_address, c.eval.target)
        )
        slots = max(executor.slots, 1)
        limit = c.termination.time_limit_s
        self.operator.set_deadline(time.monotonic() + limit - (time.perf_counter() - t0) if limit else None)
        if self.operator.concurrent:
            self.proposing = ProposalPool(self.operator, c.operator.parallel or slots)
        stop = None
        try:
            self._open_bar()
            for node in self.store.pending(run_id):  # resumed, root or warm-started nodes
                if self.reference_error:
                    break
                if node.parent_id is not None and self._budget_left() <= len(self.inflight):
                    continue  # beyond the budget: left pending (a resume with a larger budget takes it)
                parent_fitness = self.store.node(node.parent_id).fitness if node.parent_id else 0.0
                self._submit(executor, node, resumed.get(node.id), parent_fitness)
                self._drain(block=len(self.inflight) >= slots)
            while stop is None:
                self.progress.elapsed_s = time.perf_counter() - t0
                stop = self._stop_reason()
                if stop is not None:
                    break
                if self._room(slots):
                    stop = self._expand(executor)
                    self._drain(block=False)  # finished evaluations are recorded as they finish
                    continue
                self._wait_any(executor, t0)
            if self.proposing is not None:
                self._end_proposals(executor, abandon=not (stop or "").startswith("evaluation budget"))
            self._drain(block=True, all_=True)
        except KeyboardInterrupt:
            stop = "interrupted (resume with --resume " + run_id + ")"
            raise
        finally:
            if self.proposing is not None:
                self.proposing.close()
            if self.bar is not None:
                self.bar.close()
            if self.executor is None:  # a shared executor (bench) belongs to its owner
                executor.shutdown(cancel=True)
            if stop is not None and not stop.startswith("interrupted"):
                self.store.finish_run(run_id, stop)
        return self._result(stop or "stopped", time.perf_counter() - t_start)

    def _budget_left(self) -> float:
        m = self.config.termination.max_evaluations
        return (m - self.progress.evaluations) if m else float("inf")

    def _stop_reason(self) -> str | None:
        if self.reference_error:
            return self.reference_error
        reason = self.termination.reason(self.progress)
        if reason is None and self.failed_in_a_row >= MAX_FAILED_PROPOSALS:
            reason = f"the operator produced no usable code {self.failed_in_a_row} times in a row"
        waiting = bool(self.inflight or self.proposing)  # evaluations that may still spend the budget
        if reason is not None and reason.startswith("evaluation budget") and waiting:
            return None if self._budget_left() > 0 else reason
        return reason

    # ---- proposals in flight (operators that write children in threads, e.g. the LLM's) ----------
    def _room(self, slots: int) -> bool:
        """Whether another child may be started: a free slot and evaluation budget for it."""
        writing = len(self.proposing) if self.proposing is not None else 0
        busy = len(self.inflight) + writing
        if self._budget_left() <= busy:
            return False
        if self.proposing is None:
            return len(self.inflight) < slots
        limit = self.config.termination.time_limit_s
        if limit and limit - (time.perf_counter() - self._t0) < MIN_PROPOSAL_S:
            return False  # a call started now could not finish before the search does
        return not self.proposing.full and busy < slots + self.proposing.workers

    def _wait_any(self, executor: EvalExecutor, t0: float) -> None:
        """Block until an evaluation or a proposal finishes (or the time limit), then record it."""
        limit = self.config.termination.time_limit_s
        timeout = max(limit - (time.perf_counter() - t0), 0.0) if limit else None
        futures: list[Future[Any]] = [*self.inflight, *(self.proposing.pending if self.proposing else ())]
        if not futures:  # only the time limit is left to wait for
            time.sleep(min(timeout if timeout is not None else 0.05, 0.05))
            return
        done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        if self.proposing is not None:
            for sel, ctx, proposal in self.proposing.collect(done):
                self._place(executor, sel, ctx, proposal)
        self._drain(block=False)

    def _end_proposals(self, executor: EvalExecutor, abandon: bool) -> None:
        """Evaluate the proposals in flight (`abandon` False), or cancel their calls and account only
        the tokens they spent (LLM calls without a node)."""
        assert self.proposing is not None
        for sel, ctx, proposal in self.proposing.finish(abandon):
            if abandon:
                self._store_calls(None, proposal)
            else:
                self._place(executor, sel, ctx, proposal)

    def _expand(self, executor: EvalExecutor) -> str | None:
        """Select and write one child (in a proposal thread when the operator is concurrent);
        returns a stop reason if none can be written."""
        tree = TreeView.build(self.store.nodes(self.run_id), exhausted=self.exhausted)
        sel = self.policy.select(tree)
        if sel.parent_id in self.exhausted:
            if self.inflight or self.proposing:
                self._wait_any(executor, self._t0)
                return None
            return "search space exhausted: no untried mutation left"
        with AST_LOCK:
            ctx = self.builder.build(sel, step=self.progress.evaluations)
        if self.proposing is not None:
            self.proposing.submit(sel, ctx)
            return None
        with AST_LOCK:
            try:
                proposal = self.operator.propose(ctx)
            except Exception as exc:  # the operator broke: the child fails, the search goes on (as pooled)
                proposal = Proposal(None, f"operator failed: {exc}", self.operator.name, error=str(exc))
        self._place(executor, sel, ctx, proposal)
        return None

    def _place(self, executor: EvalExecutor, sel: Any, ctx: OperatorContext, proposal: Proposal) -> None:
        """Store a written child (its prompt and LLM calls) and submit it, or record why it failed."""
        if proposal.meta.get("exhausted"):
            self.exhausted.add(sel.parent_id)
            return
        parent = ctx.parent
        node_id = self.store.add_node(
            self.run_id,
            parent_id=parent.id,
            code=proposal.code,
            operator=proposal.operator,
            description=proposal.description,
            target=self.config.eval.target,
            island=sel.island,
        )
        if proposal.prompt:
            self.store.add_prompt(node_id, proposal.template or "", proposal.prompt)
        if proposal.meta:  # what the operator learns from, kept so a resumed search learns it again
            self.store.add_artifact(self.run_id, node_id, "operator_meta", content=json.dumps(proposal.meta))
        if fallback := proposal.meta.get("llm_fallback"):
            self.store.add_artifact(self.run_id, node_id, "llm_fallback", content=str(fallback))
        if proposal.tool_calls:  # the agent's tool calls and results (kegen report shows them)
            calls = json.dumps(proposal.tool_calls)
            self.store.add_artifact(self.run_id, node_id, "tool_calls", content=calls)
        self._store_calls(node_id, proposal)
        if proposal.code is None:  # nothing to evaluate: recorded, but the evaluation budget is not spent
            self.failed_in_a_row += 1
            self._record(
                node_id,
                Outcome(status=proposal.verdict or "no_code", message=proposal.error or "",
                        metrics={UNCHARGED: True}),
                proposal,
                parent.fitness,
            )  # fmt: skip
            return
        self.failed_in_a_row = 0
        self._submit(executor, self.store.node(node_id), proposal, parent.fitness)

    def _store_calls(self, node_id: int | None, proposal: Proposal) -> None:
        for call in proposal.llm_calls:
            self.store.add_llm_call(
                self.run_id,
                node_id,
                model=call.model,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                cost=call.cost,
                latency_s=call.latency_s,
                attempts=call.attempts,
                status=call.status,
                error=call.error,
                reply=call.reply,
                finish_reason=call.finish_reason,
                reply_kind=call.reply_kind,
                tokens_estimated=call.tokens_estimated,
            )
            self.progress.tokens += call.prompt_tokens + call.completion_tokens
            self.progress.cost += call.cost

    def _submit(
        self, executor: EvalExecutor, node: Node, proposal: Proposal | None, parent_fitness: float
    ) -> None:
        dup = self.store.find_by_hash(self.run_id, node.code_hash) if node.code_hash else None
        if dup is not None and dup.id != node.id:
            ev = self.store.evaluation(dup.id)
            out = Outcome(
                status=dup.verdict or "runtime_error",
                message=f"same code as node {dup.id}",
                fitness=dup.fitness,
                speedup=dup.speedup,
                candidate_time_s=ev.candidate_time_s if ev else None,
                baseline_time_s=ev.baseline_time_s if ev else None,
                roofline_fraction=ev.roofline_fraction if ev else None,
                profile=ev.profile if ev else {},
                metrics={"duplicate_of": dup.id},
            )
            self._record(node.id, out, proposal, parent_fitness)
            return
        e = self.config.eval
        fut = self.screening.submit(  # plain data in and out: the worker may be on another machine
            executor,
            node.id,
            evaluate_task,
            self.evaluator,
            EvalRequest(
                FileRef(str(self.problem_path), self.source),
                node.code or "",
                FileRef.of(self.baseline),
                target=e.target,
                machine=e.machine,
                timeout_s=e.timeout_s,
                overrides=self.eval_overrides,
            ),
        )
        self.inflight[fut] = (node.id, proposal, parent_fitness)

    def _drain(self, block: bool, all_: bool = False) -> None:
        """Record finished evaluations: those done now, at least one (`block`), or all (`all_`)."""
        while self.inflight:
            done, _ = wait(
                list(self.inflight), timeout=None if (block or all_) else 0, return_when=FIRST_COMPLETED
            )
            for fut in done:
                node_id, proposal, parent_fitness = self.inflight.pop(fut)
                try:
                    out = Outcome.from_dict(fut.result())
                except InfrastructureError as exc:  # worker/node lost, retries spent: not the candidate
                    out = Outcome(status=INFRA_STATUS, message=str(exc), metrics={"infrastructure": True})
                except Exception as exc:  # the task itself broke: the node fails, the search goes on
                    out = Outcome(status="runtime_error", message=f"evaluation worker failed: {exc}")
                self._record(node_id, out, proposal, parent_fitness)
            if not all_:
                return

    def _record(self, node_id: int, out: Outcome, proposal: Proposal | None, parent_fitness: float) -> None:
        node = self.store.node(node_id)
        fitness = out.fitness if out.ok else 0.0
        if "ProblemError: " in (out.message or ""):  # the reference itself fails: no candidate can be judged
            self.reference_error = out.message.split("ProblemError: ", 1)[1]
        self.store.record_evaluation(
            node_id,
            status=out.status,
            message=out.message,
            fitness=fitness,
            speedup=out.speedup,
            candidate_time_s=out.candidate_time_s,
            baseline_time_s=out.baseline_time_s,
            roofline_fraction=out.roofline_fraction,
            metrics=out.metrics,
            profile=out.profile,
            duration_s=out.duration_s,
        )
        self.store.backup(node_id, fitness)
        charged = self.screening.charged(out) and not (out.metrics or {}).get(UNCHARGED)
        if node.parent_id is not None and charged:
            improved = self.progress.observe(fitness, out.roofline_fraction)
        else:
            improved = False
            self.progress.best_fitness = max(self.progress.best_fitness, fitness)
        if proposal is not None:
            if parent_fitness <= 0 and node.parent_id is not None:  # submitted before its parent was judged
                parent = self.store.node(node.parent_id)
                if parent.evaluated_at is None:  # and judged before it: learn once the parent is
                    self.unjudged_parent.setdefault(parent.id, []).append((proposal, fitness))
                else:
                    self.operator.observe(proposal, parent.fitness or 0.0, fitness)
            else:
                self.operator.observe(proposal, parent_fitness, fitness)
        for child_proposal, child_fitness in self.unjudged_parent.pop(node_id, []):
            self.operator.observe(child_proposal, fitness, child_fitness)
        self.last_verdict = out.status
        if improved or node.parent_id is None:
            self._write_best()
        if self.bar is not None:  # counts what the budget counts (screened candidates are free)
            self.bar.update(self.progress.evaluations - self.bar.n)
            free = "" if charged else f" (free: {(out.metrics or {}).get('screen', 'screened')})"
            self.bar.set_postfix_str(
                f"node {node_id} | best {self.progress.best_fitness:.3f}x | last {out.status}"
                + (f" {fitness:.3f}x" if out.ok else "")
                + free
            )

    def _write_best(self) -> None:
        best = self.store.best(self.run_id)
        if best and best[0].code:
            (self.out_dir / "best.py").write_text(best[0].code)

    def _replay_learning(self) -> dict[int, Proposal]:
        """Feed the operator what earlier sessions of this run learned; returns pending nodes' proposals."""
        pending: dict[int, Proposal] = {}
        for art in self.store.artifacts(self.run_id):
            if art["kind"] != "operator_meta" or art["node_id"] is None:
                continue
            node = self.store.node(art["node_id"])
            proposal = Proposal(node.code, node.description, node.operator, meta=json.loads(art["content"]))
            self.operator.restore(proposal)
            if not node.evaluated:
                pending[node.id] = proposal
            elif node.parent_id is not None:
                self.operator.observe(proposal, self.store.node(node.parent_id).fitness, node.fitness)
        return pending

    def _restore_progress(self) -> None:
        nodes = self.store.nodes(self.run_id)
        children = [
            n for n in nodes if n.parent_id is not None and n.evaluated and n.verdict not in NO_CANDIDATE
        ]
        self.progress.evaluations = len(children)
        ok = [n.fitness for n in nodes if n.correct]
        self.progress.best_fitness = max(ok, default=0.0)
        usage = self.store.llm_usage(self.run_id)
        self.progress.tokens, self.progress.cost = int(usage["tokens"]), float(usage["cost"])

    def _open_bar(self) -> None:
        if not self.config.progress:
            return
        from tqdm import tqdm

        total = self.config.termination.max_evaluations or None
        self.bar = tqdm(
            total=total,
            initial=self.progress.evaluations,
            desc="kegen evolve",
            unit="cand",
            dynamic_ncols=True,
            leave=True,
        )

    def _result(self, stop: str, elapsed: float) -> SearchResult:
        root = self.store.root(self.run_id)
        assert root is not None
        top = self.store.best(self.run_id, k=5)
        best = top[0] if top else None
        screened = self.screening.summary(self.store, self.run_id)
        summary = {
            "run_id": self.run_id,
            "db": str(self.store.path.resolve()),
            "problem": str(self.problem_path),
            "stop_reason": stop,
            "best_node": best.id if best else None,
            "best_speedup": best.fitness if best else 0.0,
            "evaluations": self.progress.evaluations,
            "elapsed_s": round(elapsed, 2),
            "best_description": best.description if best else None,
            **screened,
        }
        (self.out_dir / "run.json").write_text(json.dumps(summary, indent=2) + "\n")
        if best is not None:
            self.store.add_artifact(self.run_id, best.id, "best", path=str(self.out_dir / "best.py"))
        return SearchResult(
            run_id=self.run_id,
            db=self.store.path,
            out_dir=self.out_dir,
            stop_reason=stop,
            root=root,
            best=best,
            evaluations=self.progress.evaluations,
            elapsed_s=elapsed,
            top=top,
            screening=screened,
        )


def _rng(seed: int) -> Any:
    import random

    return random.Random(seed)


def run_search(
    config: SearchConfig, store: GraphStore | None = None, executor: EvalExecutor | None = None
) -> SearchResult:
    """Run (or resume) one search and return how it ended; `executor` (shared, e.g. by a bench) is
    used instead of one made from `config.eval` and is left running."""
    return SearchDriver(config, store, executor).run()
