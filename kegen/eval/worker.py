"""The sandboxed worker: `python -m kegen.eval.worker REQUEST.json RESULT.json`.

Blocks the network at the Python level (on top of the namespace the parent may have put it in),
runs one Harness job and writes its result as JSON. Anything unexpected becomes a runtime_error
result; the parent handles a worker that dies or hangs.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
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
            if family in (socket.AF_INET, socket.AF_INET6, -1):
                _refuse()
            super().__init__(family, *args, **kwargs)

    socket.socket = GuardedSocket  # type: ignore[misc]
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_server"):
        setattr(socket, name, _refuse)
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(var, None)
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = "*"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kegen.eval.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req_path, res_path = Path(argv[0]), Path(argv[1])
    request = json.loads(req_path.read_text())
    block_network()
    try:
        from kegen.eval.harness import Harness, Job

        result = Harness(Job.from_request(request)).run()
    except BaseException as exc:  # the harness catches candidate errors; this is the last line of defence
        result = {
            "status": "runtime_error",
            "message": f"evaluation failed: {type(exc).__name__}: {exc}",
            "details": {"traceback": traceback.format_exc()[-3000:]},
        }
    tmp = res_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=_jsonable))
    tmp.replace(res_path)
    sys.stdout.flush()
    os._exit(0)  # do not wait on threads a candidate may have left behind


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
