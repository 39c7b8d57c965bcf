"""Units of the trusted evaluation without a sandbox: the wire, device memory, precision, seccomp."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from kegen.eval.config import EvalConfig
from kegen.eval.sandboxed.seccomp import unix_socket_filter
from kegen.eval.trusted.device_memory import PLACED_BASE, DeviceMemory, DeviceRequestError
from kegen.eval.trusted.evaluator import private_problem_copy, strict_tolerances
from kegen.eval.trusted.precision import PRECISION_OFFSET, offset_inputs
from kegen.eval.wire import decode_values, encode_values
from lowering.backend.device_wire import WireError, recv_frame, send_frame


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


# --- the device's memory: handles, bounds, limits ----------------------------------------------------


def test_device_memory_places_inputs_and_reads_views_back() -> None:
    mem = DeviceMemory(1 << 20)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    meta = mem.place(x)
    assert meta["dev"] >= PLACED_BASE and meta["nbytes"] == 48 and meta["strides"] == [4, 1]
    assert torch.equal(mem.read(meta), x)
    col = dict(meta, shape=[3], strides=[4], offset=1)  # a strided view of the same storage
    assert torch.equal(mem.read(col), x[:, 1])
    xt = x.t()  # a non-contiguous input keeps its strides
    meta_t = mem.place(xt)
    assert meta_t["strides"] == [1, 4] and torch.equal(mem.read(meta_t), xt)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"shape": [4, 4]}, "reaches past"),
        ({"offset": 1, "shape": [12], "strides": [1]}, "reaches past"),
        ({"dev": 12345}, "does not exist"),
        ({"dtype": "object"}, "unsupported device dtype"),
        ({"strides": [-4, 1]}, "integer >= 0"),
        ({"shape": [3]}, "differ in length"),
    ],
)
def test_device_memory_refuses_views_outside_their_storage(change: dict[str, Any], fragment: str) -> None:
    mem = DeviceMemory(1 << 20)
    meta = mem.place(torch.zeros(3, 4))
    with pytest.raises(DeviceRequestError, match=fragment):
        mem.read(dict(meta, **change))


def test_device_memory_handles_and_the_memory_limit() -> None:
    mem = DeviceMemory(1000)
    mem.alloc(1, 600)
    with pytest.raises(DeviceRequestError, match="in use"):
        mem.alloc(1, 8)
    with pytest.raises(DeviceRequestError, match="reserved"):
        mem.alloc(PLACED_BASE, 8)  # the evaluator's own handles
    with pytest.raises(DeviceRequestError, match="out of memory"):
        mem.alloc(2, 600)
    mem.free(1)
    mem.alloc(2, 600)  # freed memory counts no more
    placed = mem.place(torch.ones(4))
    mem.free(placed["dev"])  # the worker cannot free the evaluator's inputs
    assert torch.equal(mem.read(placed), torch.ones(4))


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
    from kegen.eval.trusted import compile_cache

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

    from kegen.eval.trusted import sandbox

    code = tmp_path / "checkout" / "src"
    code.mkdir(parents=True)
    carried = tmp_path / "llvm"  # a carried llvm-mc (wrapper script and libraries), as on a bare host
    (carried / "lib").mkdir(parents=True)
    (carried / "mc.sh").write_text("#!/bin/sh\n")
    monkeypatch.setenv("KEGEN_LLVM_MC", str(carried / "mc.sh"))
    monkeypatch.setattr(sys, "path", [*sys.path, str(code), str(code.parent), "/tmp"])
    paths = sandbox._code_paths_under_private_mounts()
    if str(tmp_path.resolve()).startswith("/tmp/"):
        assert str(code.parent.resolve()) in paths and str(code.resolve()) not in paths
        assert str(carried.resolve()) in paths  # the worker's lowering finds its assembler
    assert "/tmp" not in paths and all(p.startswith(("/tmp/", "/run/")) for p in paths)
    args = sandbox._bwrap_args("bwrap", None)
    assert args.index("/tmp") < max((i for i, a in enumerate(args) if a in paths), default=len(args))


class _MakesHostTensors(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(x.shape[-1])  # written for host tensors: needs the default device


class _NamesItsDevice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + torch.zeros(x.shape[-1], device=x.device)


class _ReturnsAHostTensor(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.arange(3)


def test_baselines_take_the_default_device_only_where_the_reference_needs_it() -> None:
    """A torch function mode costs every torch call Python dispatch; the baselines are timed under
    `with torch.device(...)` only where the reference fails or returns tensors elsewhere without it."""
    from kegen.eval.trusted.baselines import needs_default_device

    x = [torch.empty(4, 8, device="meta")]
    assert needs_default_device(_MakesHostTensors(), x, "meta")
    assert needs_default_device(_ReturnsAHostTensor(), x, "meta")
    assert not needs_default_device(_NamesItsDevice(), x, "meta")
    assert not needs_default_device(_MakesHostTensors(), [torch.ones(4, 8)], "cpu")
