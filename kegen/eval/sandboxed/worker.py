"""Network blocking for candidate processes, and the Nsight Compute runner.

`block_network()` is what every candidate worker does first (on top of the sandbox's empty
network namespace, where bwrap is available). `python -m kegen.eval.sandboxed.worker REQUEST.json RESULT.json`
runs a candidate's forward for `ncu` to observe (`kegen.eval.trusted.profile_gpu`): its only output is the
profiler's, never a verdict.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, NoReturn


class NetworkDisabled(PermissionError):
    pass


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise NetworkDisabled("network access is disabled in the kegen evaluation sandbox")


def block_network() -> None:
    """Make every socket creation and name lookup fail (AF_UNIX stays allowed for torch internals)."""
    real_socket = socket.socket

    class GuardedSocket(real_socket):  # type: ignore[misc, valid-type]
        def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
            if family in (socket.AF_INET, socket.AF_INET6, -1) and kwargs.get("fileno") is None:
                _refuse()
            super().__init__(family, *args, **kwargs)

    socket.socket = GuardedSocket  # type: ignore[misc]
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_server"):
        setattr(socket, name, _refuse)
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(var, None)
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = "*"


def run_forward_for_ncu(request: dict[str, Any]) -> None:
    """Two forwards of the candidate on the problem's inputs: the first compiles and autotunes, the
    second runs between cudaProfilerStart/Stop for Nsight Compute (`--profile-from-start off`)."""
    import torch

    from kegen.eval.config import EvalConfig
    from kegen.eval.inputs import InputFactory
    from kegen.eval.loader import load_candidate, load_problem
    from kegen.eval.models import build_model

    config = EvalConfig.from_dict(request["config"])
    problem = load_problem(request["problem"])
    factory = InputFactory(problem, "cuda")
    torch.manual_seed(config.seed)
    model = build_model(load_candidate(request["candidate"]), factory.init_inputs(), config.seed, "cuda")
    inputs = factory.make(config.seed)
    with torch.no_grad(), torch.device("cuda"):
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kegen.eval.sandboxed.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text())
    block_network()
    run_forward_for_ncu(request)
    Path(argv[1]).write_text(json.dumps({"status": "ran"}))
    sys.stdout.flush()
    os._exit(0)  # do not wait on threads a candidate may have left behind


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
