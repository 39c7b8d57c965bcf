"""Units of the trusted evaluation without a sandbox: the wire, provenance, precision, seccomp."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kegen.eval import provenance
from kegen.eval.config import EvalConfig
from kegen.eval.device import CallRecord, LaunchLog, parse_slots, storage_dtypes
from kegen.eval.evaluator import private_problem_copy, strict_tolerances
from kegen.eval.precision import PRECISION_OFFSET, offset_inputs
from kegen.eval.seccomp import unix_socket_filter
from kegen.eval.wire import decode_values, encode_values
from lowering.backend.device_wire import WireError, recv_frame, send_frame
from lowering.backend.launch import LaunchRecord


def test_values_round_trip_as_plain_tensors_and_scalars() -> None:
    class Sub(torch.Tensor):
        pass

    values: list[Any] = [
        torch.arange(6, dtype=torch.float32).reshape(2, 3).t(),  # non-contiguous
        torch.tensor([1, 2], dtype=torch.int64),
        torch.ones(3, dtype=torch.bfloat16),
        torch.tensor(2.5),
        torch.zeros(0, 4),
        torch.ones(2).as_subclass(Sub),
        3,
        0.5,
        None,
    ]
    metas, blobs = encode_values(values)
    out = decode_values(metas, [bytearray(b) for b in blobs])
    for a, b in zip(values, out, strict=True):
        if isinstance(a, torch.Tensor):
            assert (
                type(b) is torch.Tensor and b.dtype == a.dtype and torch.equal(b, a.as_subclass(torch.Tensor))
            )
        else:
            assert a == b
    assert metas[0]["strides"] == [1, 3]  # where it lived is recorded, the bytes arrive contiguous


@pytest.mark.parametrize(
    "meta, blob, fragment",
    [
        ({"dtype": "object", "shape": [1], "blob": 0}, b"x", "unsupported dtype"),
        ({"dtype": "float32", "shape": [2], "blob": 0}, b"1234", "needs 8 bytes"),
        ({"dtype": "float32", "shape": [-1], "blob": 0}, b"", "bad shape"),
        ({"dtype": "float32", "shape": [1], "blob": 3}, b"1234", "missing blob"),
    ],
)
def test_decoding_rejects_malformed_values(meta: dict[str, Any], blob: bytes, fragment: str) -> None:
    with pytest.raises(WireError, match=fragment):
        decode_values([meta], [bytearray(blob)])


def test_frames_carry_json_and_bytes_and_refuse_garbage() -> None:
    a, b = socket.socketpair()
    with a, b:
        send_frame(a, {"op": "x", "n": [1, 2.5]}, [b"abc", b""])
        header, blobs = recv_frame(b)
        assert header == {"op": "x", "n": [1, 2.5]} and blobs == [bytearray(b"abc"), bytearray()]
        send_frame(a, {"op": "big"}, [b"\0" * 100])
        with pytest.raises(WireError, match="more than"):
            recv_frame(b, max_total=50)
    c, d = socket.socketpair()
    with c, d:
        c.sendall(b"PICKLE\x00\x00" + b"\0" * 16)
        with pytest.raises(WireError, match="malformed"):
            recv_frame(d)


def test_launch_requests_are_validated() -> None:
    assert parse_slots([["ptr", 0, 8], ["null"], ["scalar", 5]], 1) == [
        ("ptr", 0, 8),
        ("null",),
        ("scalar", 5),
    ]
    for bad in ([["ptr", 3, 0]], [["ptr", 0, -1]], [["exec", "rm -rf /"]], "x"):
        with pytest.raises(ValueError):
            parse_slots(bad, 1)
    assert storage_dtypes([("ptr", 0, 0), ("scalar", 1)], ["*fp32", "i32"], 1) == ["float32"]


# --- provenance on a hand-made device record ----------------------------------------------------


def _b(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def _log(
    key: int, pre: torch.Tensor, post: torch.Tensor, *extra: tuple[int, torch.Tensor, torch.Tensor]
) -> LaunchLog:
    keys = [key] + [k for k, _, _ in extra]
    pres = [_b(pre)] + [_b(p) for _, p, _ in extra]
    posts = [_b(post)] + [_b(q) for _, _, q in extra]
    return LaunchLog(
        LaunchRecord("k", (1, 1, 1), SimpleNamespace(seconds=1e-6)),
        b"elf",
        [("ptr", i, 0) for i in range(len(keys))],
        ["*fp32"] * len(keys),
        False,
        False,
        "cache",
        keys,
        pres,
        posts,
        ["float32"] * len(keys),
    )


class _Device:
    """Replays a launch as a kernel that stores `stores` (or nothing) into storage 0."""

    def __init__(self, stores: torch.Tensor | None) -> None:
        self.stores = stores

    def replay(self, log: LaunchLog, pre: list[Any], only: int | None = None) -> list[Any]:
        return [_b(self.stores) if self.stores is not None else pre[0], *pre[1:]]

    def replay_poisoned(self, log: LaunchLog, j: int, positions: Any, poison: Any) -> Any:
        import numpy as np

        pre = np.frombuffer(bytes(log.pre[j]), dtype=poison.dtype).copy()
        pre[positions] = poison
        after = self.replay(log, [pre.tobytes() if i == j else p for i, p in enumerate(log.pre)])[j]
        return np.frombuffer(bytes(after), dtype=poison.dtype)[positions]


def _meta(key: int, n: int) -> dict[str, Any]:
    return {"key": key, "offset": 0, "strides": [1], "shape": [n]}


def test_kernel_written_outputs_pass_and_host_edits_do_not() -> None:
    vals = torch.randn(64)
    call = CallRecord([_log(7, torch.zeros(64), vals)])
    assert provenance.check_outputs(_Device(None), call, [_meta(7, 64)], [vals.clone()]) is None
    edited = vals.clone()
    edited[3] += 1
    msg = provenance.check_outputs(_Device(None), call, [_meta(7, 64)], [edited])
    assert msg and "differ from what the kernels left" in msg


def test_unchanged_elements_are_settled_by_a_poisoned_replay() -> None:
    vals = torch.randn(64)
    vals[:10] = 0  # the kernel wrote zeros where zeros already were
    call = CallRecord([_log(7, torch.zeros(64), vals)])
    assert provenance.check_outputs(_Device(vals), call, [_meta(7, 64)], [vals.clone()]) is None
    msg = provenance.check_outputs(_Device(None), call, [_meta(7, 64)], [vals.clone()])  # stores nothing
    assert msg and "10 of 64 elements were not written" in msg


def test_outputs_from_memory_no_kernel_touched_fail_unless_copies_of_kernel_results() -> None:
    vals = torch.randn(64)
    call = CallRecord([_log(7, torch.zeros(64), vals)])
    assert (
        provenance.check_outputs(_Device(None), call, [_meta(99, 64)], [vals.flip(0)]) is None
    )  # a host copy
    msg = provenance.check_outputs(_Device(None), call, [_meta(99, 64)], [torch.randn(64)])
    assert msg and "not written by any kernel" in msg
    msg = provenance.check_outputs(_Device(None), CallRecord([]), [_meta(99, 4)], [torch.ones(4)])
    assert msg and "no kernel was launched" in msg


def test_host_data_copied_by_a_kernel_is_flagged_but_inputs_weights_and_fills_are_not() -> None:
    x = torch.randn(64)
    answer = x * 3 + 1  # computed on the host during the call
    copy = CallRecord([_log(1, answer, answer, (2, torch.zeros(64), answer.clone()))])
    msg = provenance.check_host_data(copy, {}, [x], [_b(x)], [answer.clone()])
    assert msg and "host produced during the call" in msg
    # a kernel computing from the input (passed as-is) and a zero-filled output: nothing flagged
    honest = CallRecord([_log(1, x, x, (2, torch.zeros(64), answer.clone()))])
    assert provenance.check_host_data(honest, {}, [x], [_b(x)], [answer.clone()]) is None
    # weights prepared at construction are allowed data too
    w = torch.randn(64)
    weights = CallRecord([_log(1, w, w, (2, torch.zeros(64), w.clone()))])
    assert provenance.check_host_data(weights, {}, [w], [], [w.clone()]) is None


# --- precision, tolerances, problem copy, seccomp ---------------------------------------------------


def test_precision_trial_inputs_and_tolerance_policy() -> None:
    x, idx = torch.randn(4), torch.tensor([1, 2])
    out = offset_inputs([x, idx, 3])
    assert out is not None and torch.equal(out[0], x + PRECISION_OFFSET) and out[1] is idx
    assert offset_inputs([idx]) is None
    loose = EvalConfig(atol=0.05, rtol=1e-6)
    strict = strict_tolerances(loose, "float32")
    assert strict.tolerances("float32") == (1e-4, 1e-6)
    assert strict_tolerances(EvalConfig(), "float16").tolerances("float16") == (1e-2, 1e-2)


def test_problem_copy_is_private_and_content_hashed(tmp_path: Path) -> None:
    src = tmp_path / "p.py"
    src.write_text("X = 1\n")
    copy, digest = private_problem_copy(src, tmp_path)
    assert digest == hashlib.sha256(b"X = 1\n").hexdigest() and digest[:16] in copy.name
    assert copy.read_text() == "X = 1\n" and oct(copy.stat().st_mode & 0o777) == "0o400"


def test_seccomp_filter_is_a_bpf_program_on_x86_64() -> None:
    import platform

    prog = unix_socket_filter()
    if platform.machine() != "x86_64":
        assert prog is None
        return
    assert prog is not None and len(prog) % 8 == 0 and len(prog) // 8 == 11


def test_compile_cache_is_kept_per_exact_source_with_checked_paths(tmp_path: Path, monkeypatch) -> None:
    from kegen.eval import compile_cache

    monkeypatch.setenv("KEGEN_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("x = 2\n")
    ka, kb = (compile_cache.cache_key(p, "mtia", "mtia-2i") for p in (a, b))
    assert ka != kb and ka != compile_cache.cache_key(a, "mtia", "mtia-300")
    for bad in ("../evil", "/etc/passwd", "a/../../b", "", "a\0b", 3):
        assert compile_cache.safe_relpath(bad) is None
    compile_cache.keep(ka, [("../escape", b"x")])  # one bad path: nothing is kept
    assert (
        not (tmp_path / "cache" / "eval-triton" / ka).exists()
        and not (tmp_path / "cache" / "escape").exists()
    )
    compile_cache.keep(ka, [("k1/kernel.elf", b"\x7fELF")])
    job = tmp_path / "job"
    job.mkdir()
    assert (
        compile_cache.seed_job(ka, job)
        and (job / compile_cache.SEED_DIR / "k1" / "kernel.elf").read_bytes() == b"\x7fELF"
    )
    assert not compile_cache.seed_job(kb, tmp_path / "job2")  # another source never sees it


def test_code_under_tmp_is_bound_back_into_the_sandbox(tmp_path, monkeypatch) -> None:
    """A checkout or venv under /tmp (hidden by the sandbox's private /tmp) is bound back read-only;
    the host's /tmp itself never is."""
    import sys

    from kegen.eval import sandbox

    code = tmp_path / "checkout" / "src"
    code.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(code), str(code.parent), "/tmp"])
    paths = sandbox._code_paths_under_private_mounts()
    if str(tmp_path.resolve()).startswith("/tmp/"):
        assert str(code.parent.resolve()) in paths and str(code.resolve()) not in paths
    assert "/tmp" not in paths and all(p.startswith(("/tmp/", "/run/")) for p in paths)
    args = sandbox._bwrap_args("bwrap", None)
    assert args.index("/tmp") < max((i for i, a in enumerate(args) if a in paths), default=len(args))
