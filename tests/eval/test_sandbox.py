"""Class 6 of issue 12: a candidate that attacks the machine. Under bubblewrap it cannot change the
problem file or project sources, leave a daemon behind, reach host unix sockets or fill the disk."""

from __future__ import annotations

import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from eval_helpers import candidate, problem, quick

from kegen.eval import Status, evaluate
from kegen.eval.trusted.sandbox import sandbox_kind

pytestmark = pytest.mark.skipif(
    sandbox_kind().name != "bwrap", reason=sandbox_kind().warning or "bubblewrap unavailable"
)


def _listen(path: Path, accepted: list[bytes]) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)

    def serve() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                conn, _ = server.accept()
            except OSError:
                if server.fileno() < 0:
                    return
                continue
            accepted.append(conn.recv(64))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_machine_attacks_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside /tmp (the sandbox has its own), so that the worker sees these files, read-only.
    base = Path.home() / ".cache" / f"kegen-hostile-{uuid.uuid4().hex[:8]}"
    base.mkdir(parents=True)
    try:
        prob = base / "problem.py"
        shutil.copyfile(problem("vector_add"), prob)
        source = base / "project_source.py"
        shutil.copyfile(Path(__file__).resolve().parents[2] / "kegen" / "eval" / "trusted" / "checker.py", source)
        before = {p.name: p.read_bytes() for p in (prob, source)}
        accepted: list[bytes] = []
        server = _listen(base / "host.sock", accepted)
        monkeypatch.setenv("KEGEN_HOSTILE_DIR", str(base))
        r = evaluate(
            prob,
            candidate("hostile_os_escape"),
            config=quick("cpu", fresh_process=True, trials=1, memory_limit_mb=1536),  # CUDA torch: ~800 MB
        )
        assert r.status is Status.INCORRECT, (r.status, r.message)  # its zeros were checked against
        time.sleep(4)  # the daemon would have written by now
        server.close()
        assert {p.name: p.read_bytes() for p in (prob, source)} == before
        assert not (base / "daemon_was_here").exists()
        assert accepted == []
        assert r.details["sandbox"] == "bwrap" and r.details["network_isolation"] == "namespace"
    finally:
        shutil.rmtree(base, ignore_errors=True)
