"""Issue 23, part 2: every evaluation starts clean. No writable path is shared by two candidates or by
a candidate and a baseline, no cache is read from a writable place, a worker cannot reach the
zygote it was forked from (ptrace, /proc/<pid>/mem, process_vm_readv, signals), /dev/shm and /tmp
are private, capped and counted in the memory limit, and an honest candidate's time and a
candidate's speedup over its seed do not depend on what an earlier candidate did."""

from __future__ import annotations

import os
import pickle
import platform
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from eval_helpers import candidate, needs_mtia, quick

from kegen.eval import Status, evaluate
from kegen.eval.trusted.sandbox import sandbox_kind

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "kegen" / "examples" / "vector_add" / "problem.py"
SEED = ROOT / "kegen" / "examples" / "vector_add" / "seed.py"

needs_bwrap = pytest.mark.skipif(
    sandbox_kind().name != "bwrap", reason=sandbox_kind().warning or "bubblewrap unavailable"
)
x86_64_linux = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64", reason="the seccomp filter is x86-64 only"
)


def _eval(source: Path | str, **kw: object) -> object:
    return evaluate(PROBLEM, source, config=quick(), **kw)  # type: ignore[arg-type]


@x86_64_linux
def test_worker_filter_refuses_ptrace_mounts_and_namespaces_but_not_threads() -> None:
    code = textwrap.dedent(
        """
        import ctypes, errno, os, socket, threading
        from kegen.eval.sandboxed.isolate import install_filter
        from kegen.eval.sandboxed.seccomp import worker_filter
        libc = ctypes.CDLL(None, use_errno=True)
        install_filter(worker_filter())
        def err(rc):
            return ctypes.get_errno() if rc == -1 else 0
        out = {
            "ptrace": err(libc.ptrace(16, os.getppid(), 0, 0)),
            "process_vm_readv": err(libc.syscall(310, os.getppid(), 0, 0, 0, 0, 0)),
            "unshare": err(libc.unshare(0x20000)),
            "mount": err(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)),
            "umount2": err(libc.umount2(b"/tmp", 2)),
            "setns": err(libc.setns(0, 0)),
            "clone_newuser": err(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)),
            "clone3": err(libc.syscall(435, 0, 0)),
        }
        try:
            socket.socket(socket.AF_UNIX)
            out["af_unix"] = 0
        except OSError as exc:
            out["af_unix"] = exc.errno
        done = []
        t = threading.Thread(target=lambda: done.append(1)); t.start(); t.join()
        out["thread"] = len(done)
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(out)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    got = eval(run.stdout.strip().splitlines()[-1])  # noqa: S307 - our own subprocess's dict
    for name in (
        "ptrace",
        "process_vm_readv",
        "unshare",
        "mount",
        "umount2",
        "setns",
        "clone_newuser",
        "af_unix",
    ):
        assert got[name] == 1, (name, got)  # EPERM
    assert got["clone3"] == 38  # ENOSYS: libc falls back to clone
    assert got["thread"] == 1 and got["fork"] == 7


def test_the_lowering_parser_reads_no_cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from lowering.ttir import parser

    marker = tmp_path / "unpickled"

    class Planted:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (exec, (f"open({str(marker)!r}, 'w').write('x')",))

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    blob = pickle.dumps(Planted())
    for name in (".lark_cache_root_0_3_11.tmp", f".lark_cache_{os.getenv('USER', 'x')}_0_3_11.tmp"):
        (tmp_path / name).write_bytes(blob)
    parser.ttir_parser.cache_clear()
    try:
        built = parser.ttir_parser()
        assert built is not None
        assert not marker.exists()
        assert not [
            p for p in tmp_path.iterdir() if p.name.startswith(".lark_cache") and p.read_bytes() != blob
        ]
    finally:
        parser.ttir_parser.cache_clear()


@needs_bwrap
@needs_mtia()
def test_planted_modules_and_caches_never_reach_a_later_worker() -> None:
    alone = _eval(candidate("vector_add_ok"))
    assert alone.status == Status.OK, alone.message  # type: ignore[attr-defined]
    planter = _eval(candidate("hostile_plant_module"))
    assert planter.status == Status.OK, planter.message  # type: ignore[attr-defined]
    # the planted probe module (kills its importer) is not found by the next worker
    probe = _eval(candidate("hostile_import_probe"))
    assert probe.status == Status.OK, probe.message  # type: ignore[attr-defined]
    after = _eval(candidate("vector_add_ok"))
    assert after.status == Status.OK, after.message  # type: ignore[attr-defined]
    assert after.candidate_time_s == alone.candidate_time_s  # type: ignore[attr-defined]


@needs_bwrap
@needs_mtia()
def test_a_worker_cannot_reach_the_zygote_or_any_other_process() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("hostile_ptrace_control", candidate("hostile_ptrace"))
    assert spec is not None and spec.loader is not None
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    # control: the same attacks work on a process of this test's own (outside the sandbox)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        control = fixture.probe([child.pid])
    finally:
        child.kill()
        child.wait()
    if os.geteuid() == 0:
        # root's ptrace, /proc/<pid>/mem read and SIGSTOP work on it; process_vm_readv may be refused by
        # the host's own seccomp profile (Docker's default allows it only with CAP_SYS_PTRACE)
        expected = [f"ptrace attach {child.pid}", f"/proc/{child.pid}/mem read", f"SIGSTOP {child.pid}"]
        assert set(expected) <= set(control), control
    assert control, "no attack works on this host even outside the sandbox: the test proves nothing"
    r = _eval(candidate("hostile_ptrace"))
    assert r.status == Status.OK, r.message  # type: ignore[attr-defined]
    after = _eval(candidate("vector_add_ok"))
    assert after.status == Status.OK, after.message  # type: ignore[attr-defined]


@needs_bwrap
@needs_mtia()
def test_dev_shm_and_tmp_are_private_capped_and_counted() -> None:
    capped = _eval(candidate("hostile_shm_cap"))
    assert capped.status == Status.OK, capped.message  # type: ignore[attr-defined]
    honest = evaluate(PROBLEM, candidate("vector_add_ok"), config=quick(memory_limit_mb=HOG_LIMIT_MB))
    assert honest.status == Status.OK, honest.message
    hog = evaluate(PROBLEM, candidate("hostile_shm_hog"), config=quick(memory_limit_mb=HOG_LIMIT_MB))
    assert hog.status == Status.RUNTIME_ERROR, hog.message
    assert "memory limit" in (hog.message or ""), hog.message


# a worker holds ~0.35 GB resident here; the hog adds 640 MiB of tmpfs
HOG_LIMIT_MB = 800


@needs_bwrap
@needs_mtia()
def test_speedup_over_the_seed_does_not_depend_on_what_the_candidate_did() -> None:
    seed = SEED.read_text()
    # unique sources: the evaluator measures each baseline once per process; these must be measured
    # right after their candidate, in workers of the same zygote
    clean = _eval(candidate("vector_add_ok"), baseline=seed + f"\n# {uuid.uuid4().hex}\n")
    hostile = _eval(candidate("hostile_plant_module"), baseline=seed + f"\n# {uuid.uuid4().hex}\n")
    for r in (clean, hostile):
        assert r.status == Status.OK, r.message  # type: ignore[attr-defined]
        assert r.baseline_time_s, r.details  # type: ignore[attr-defined]
    assert hostile.baseline_time_s == clean.baseline_time_s  # type: ignore[attr-defined]
    assert hostile.candidate_time_s == clean.candidate_time_s  # type: ignore[attr-defined]
    assert hostile.speedup == clean.speedup  # type: ignore[attr-defined]
