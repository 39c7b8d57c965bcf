"""`kegen evolve PROBLEM.py`: search for a faster kernel (tree search, offline or LLM operator)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kegen.executor.cli import add_executor_arguments, check_executor_arguments
from kegen.search.config import (
    OPERATORS,
    POLICIES,
    EvalSliceConfig,
    OperatorConfig,
    PolicyConfig,
    SearchConfig,
    StoreConfig,
    TerminationConfig,
)
from kegen.search.termination import parse_duration
from kegen.settings import load_settings, select_machine
from kegen.targets import TARGETS


class _Deprecated(argparse.Action):
    """An old flag name kept as an alias: it sets the new one and says so on stderr."""

    NEW = {"--max-tokens": "--token-limit", "--llm-max-tokens": "--llm-reply-tokens"}

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        new = self.NEW.get(option_string or "", self.dest)
        what = "the search's limit on LLM tokens" if new == "--token-limit" else "one reply's token budget"
        print(f"kegen evolve: {option_string} is deprecated; it is {what}: use {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "problem", type=Path, help="problem file (KernelBench format: Model, get_inputs, ...)"
    )
    parser.add_argument(
        "--seed",
        type=Path,
        help="starting candidate (ModelNew with Triton kernels); "
        "without it the offline operator drafts one from the reference",
    )
    parser.add_argument(
        "--template-drafts",
        action="store_true",
        help="with --seed: also start from kegen's template draft of the problem (a child of the seed)",
    )
    parser.add_argument("--target", default="mtia", choices=TARGETS)
    parser.add_argument("--machine", default=None, help="machine description for mtia (default: mtia-2i)")
    parser.add_argument("--policy", default="uct", choices=POLICIES)
    parser.add_argument(
        "--operator",
        default=None,
        choices=OPERATORS,
        help="offline (default without an LLM endpoint), llm (one call per child) or agent (the LLM calls"
        " kegen's tools first: compile, run, profile, knowledge; single-shot when the server has no tools)",
    )
    parser.add_argument(
        "--model", action="append", help="LLM model name (repeat for several: a bandit picks)"
    )
    llm = parser.add_argument_group("LLM operator (defaults from KEGEN_LLM_* settings; docs/LLM.md)")
    llm.add_argument(
        "--llm-context", type=int, help="the served context window in tokens (default: ask the server)"
    )
    llm.add_argument(
        "--llm-reply-tokens",
        type=int,
        dest="llm_reply_tokens",
        help="the reply budget of one LLM call in tokens (default: a quarter of the context, 256-4096)",
    )
    llm.add_argument(
        "--llm-max-tokens", type=int, dest="llm_reply_tokens", action=_Deprecated,
        help="deprecated: --llm-reply-tokens",
    )
    llm.add_argument(
        "--llm-timeout",
        type=float,
        help="deadline of one proposal in s, retries included (default: from the prompt, the reply budget"
        " and the server's measured speed; 120 s for a remote server before it is measured)",
    )
    llm.add_argument(
        "--llm-calls",
        type=int,
        help="proposals that may ask the LLM (default 3 x --budget); then the offline operator writes."
        " Replies without code cost no evaluation",
    )
    llm.add_argument(
        "--llm-tool-calls", type=int, help="the agent's tool calls per proposal (default 6; 0: single-shot)"
    )
    llm.add_argument(
        "--llm-review",
        action="store_true",
        default=None,
        help="a second call reviews each child against its parent (shortcuts, shape assumptions): recorded",
    )
    llm.add_argument("--llm-retries", type=int, help="retries of 429/5xx/dropped connections (default 4)")
    llm.add_argument(
        "--llm-fallback",
        type=int,
        help="unusable replies in a row before the offline operator takes over (default 4; 0: never)",
    )
    llm.add_argument(
        "--llm-parallel", type=int, help="LLM proposals in flight at once (default: one per --jobs slot)"
    )
    parser.add_argument(
        "--budget", type=int, default=12, help="number of candidates to evaluate (default 12)"
    )
    parser.add_argument("--time-limit", help="wall-time limit, e.g. 600, 10m, 1h")
    parser.add_argument(
        "--token-limit", type=int, dest="token_limit", help="stop the search after this many LLM tokens"
    )
    parser.add_argument(
        "--max-tokens", type=int, dest="token_limit", action=_Deprecated, help="deprecated: --token-limit"
    )
    parser.add_argument("--max-cost", type=float, help="stop after this LLM cost")
    parser.add_argument("--plateau", type=int, help="stop after this many evaluations without a gain")
    parser.add_argument(
        "--target-speedup", type=float, help="stop once this speedup over the seed is reached"
    )
    parser.add_argument(
        "--target-roofline", type=float, help="stop once this fraction of the roofline is reached"
    )
    parser.add_argument(
        "--draft", type=int, default=3, help="children of the root written in the draft phase"
    )
    parser.add_argument("--db", type=Path, help="graph store (default: $KEGEN_HOME/search.db)")
    parser.add_argument("--resume", metavar="RUN", help="continue a stopped or killed run")
    parser.add_argument(
        "--no-warm-start", action="store_true", help="do not start from past runs' best nodes"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="parallel evaluation processes (0 = in this process)"
    )
    add_executor_arguments(parser)
    parser.add_argument("--out", type=Path, help="run directory (default: kegen-runs/RUN)")
    parser.add_argument("--rng-seed", type=int, default=0)
    parser.add_argument(
        "--evaluator",
        default=EvalSliceConfig.evaluator,
        help="evaluation function as module:function (default: kegen eval)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_config(args: argparse.Namespace) -> SearchConfig:
    """A SearchConfig from the command line over the environment's settings."""
    check_executor_arguments(args)
    settings = load_settings()
    op_name = args.operator or ("llm" if settings.llm.base_url else "offline")
    operator = OperatorConfig.from_settings(
        settings.llm,
        name=op_name,
        models=tuple(args.model) if args.model else None,
        context_tokens=args.llm_context,
        max_tokens=args.llm_reply_tokens,
        timeout_s=args.llm_timeout,
        max_retries=args.llm_retries,
        fallback_after=args.llm_fallback,
        parallel=args.llm_parallel,
        max_calls=args.llm_calls if args.llm_calls is not None else 3 * args.budget,
        tool_calls=args.llm_tool_calls,
        review=args.llm_review,
    )
    time_limit = parse_duration(args.time_limit) if args.time_limit else None
    termination = TerminationConfig(
        max_evaluations=args.budget,
        time_limit_s=time_limit,
        max_tokens=args.token_limit,
        max_cost=args.max_cost,
        plateau_steps=args.plateau,
        target_speedup=args.target_speedup,
        target_roofline_fraction=args.target_roofline,
    )
    machine = args.machine or settings.sim.machine
    if args.target == "mtia":
        machine = select_machine(machine)  # compiles and evaluation workers follow KEGEN_MACHINE
    return SearchConfig(
        problem=args.problem,
        seed=args.seed,
        template_drafts=args.template_drafts,
        out_dir=args.out,
        resume=args.resume,
        rng_seed=args.rng_seed,
        # an LLM can repair failed candidates: let the policy pick a failed leaf now and then
        policy=replace(
            PolicyConfig(name=args.policy),
            draft_children=args.draft,
            debug_probability=0.15 if op_name in ("llm", "agent") else 0.0,
        ),
        operator=operator,
        termination=termination,
        eval=EvalSliceConfig(target=args.target, machine=machine, jobs=args.jobs, evaluator=args.evaluator,
                             executor=args.executor, ray_address=args.ray_address),
        store=StoreConfig(db=args.db or settings.paths.home / "search.db", warm_start=not args.no_warm_start),
        progress=not args.no_progress,
    )


def run(args: argparse.Namespace) -> int:
    from kegen.report.llm import llm_summary
    from kegen.report.text import summary_table
    from kegen.search.loop import run_search
    from kegen.search.operators.drafting import DraftError
    from kegen.search.operators.llm import LLMUnavailable
    from kegen.search.store import GraphStore

    try:
        config = build_config(args)
        store = GraphStore(config.store.db)
        result = run_search(config, store)
    except (FileNotFoundError, DraftError, LLMUnavailable, ValueError, KeyError, RuntimeError) as exc:
        print(f"kegen evolve: {exc}", file=sys.stderr)
        return 1
    print(summary_table(store, result.run_id))
    if (llm := llm_summary(store, result.run_id)) is not None:
        print("\n" + llm)
    if result.best is None:  # nothing correct: no speedup and no best.py to point at
        verdict = result.root.verdict or "not evaluated"
        print(f"\nno correct candidate: the seed ({verdict}) and every child failed; no best to report")
    elif result.best.parent_id is not None:
        print(
            f"\nbest speedup found: {result.best_speedup:.3f}x over the seed (node {result.best.id}: "
            f"{result.best.description})"
        )
    else:
        print("\nbest speedup found: 1.000x (no child beat the seed)")
    print(f"stopped: {result.stop_reason}")
    from kegen.search.loop import NO_CANDIDATE

    done = [n for n in store.nodes(result.run_id) if n.parent_id is not None and n.evaluated]
    children = sum(1 for n in done if n.verdict not in NO_CANDIDATE)
    if no_code := len(done) - children:  # LLM replies without code are recorded but never evaluated
        print(f"replies without code: {no_code} (recorded on their nodes, not charged to the budget)")
    if children > result.evaluations:  # the budget counts simulated candidates; screened ones are free
        print(
            f"candidates: {result.evaluations} evaluated against the budget, {children - result.evaluations} "
            "more screened without simulation (duplicates or rejected) at no cost"
        )
    if result.screening:
        from kegen.search.screening import screening_line

        print(screening_line(result.screening))
    if result.best is not None:
        print(f"best candidate: {result.out_dir / 'best.py'}")
    print(f"run: {result.run_id}  (kegen report {result.out_dir}  |  db {result.db})")
    return 0
