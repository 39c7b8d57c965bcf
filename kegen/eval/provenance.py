"""Where a candidate's outputs came from, as the out-of-process mtia device saw it.

Two checks after each call (every call, timed ones included):

- `check_outputs`: every output element must have been written by a kernel launched during the
  call, and the bytes the candidate returned must be the bytes the device left in that storage.
  "Written" is decided on the device's own record: bytes that differ before/after a launch, and,
  for elements whose value happened not to change, by replaying the launch with those bytes
  poisoned (a kernel that stores to them overwrites the poison). An output that is a host copy
  of kernel results (`.contiguous()`, `.to(dtype)`) is accepted when all its values are values a
  kernel wrote during the call.
- `check_host_data`: data the host produced *during* the call and fed to a kernel that left it
  unchanged (the kernel read it, or ignored it) must not be where the outputs' values come from:
  a "copy kernel" moving host-computed answers into the output is host computation.
  Host data made of the call's inputs, of what the model held after construction (weights), of
  kernel results or of a few constants (fills) is fine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kegen.eval.device import CallRecord, LaunchLog, MtiaDevice
from kegen.eval.wire import DTYPES
from lowering.backend.launch import Buffer, as_u8, same_bytes

_UINT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NP_UINT = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}
MIN_COPIED = 16  # outputs smaller than this are not judged by the copy check
COPIED_FRACTION = 0.5


def _elements(buf: Buffer, itemsize: int) -> torch.Tensor:
    """The buffer's whole elements as integers of `itemsize` bytes (a view: never written here)."""
    raw = as_u8(buf)
    n = raw.size // itemsize
    if n == 0:
        return torch.empty(0, dtype=_UINT[itemsize])
    if not raw.flags.writeable:  # torch tensors over read-only memory are not allowed
        raw = raw.copy()
    return torch.from_numpy(raw[: n * itemsize].view(_NP_UINT[itemsize]))


def _view_index(offset: int, strides: list[int], shape: list[int]) -> torch.Tensor | slice:
    """Storage element indices of a strided view, or a slice when the view is one contiguous run."""
    if _contiguous(strides, shape):
        return slice(offset, offset + int(np.prod(shape, dtype=np.int64)))
    idx = torch.full((), offset, dtype=torch.int64)
    for size, stride in zip(shape, strides, strict=True):
        idx = idx.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return idx.reshape(-1)


def _contiguous(strides: list[int], shape: list[int]) -> bool:
    expect = 1
    for size, stride in reversed(list(zip(shape, strides, strict=True))):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


def _values(buf: Buffer, dtype_name: str | None) -> torch.Tensor | None:
    dtype = DTYPES.get(dtype_name or "")
    if dtype is None or not (dtype.is_floating_point):
        return None
    itemsize = torch.empty((), dtype=dtype).element_size()
    return _elements(buf, itemsize).view(dtype)


def _isin(values: torch.Tensor, pool: list[torch.Tensor]) -> torch.Tensor:
    """Elementwise: is each value (bitwise, in `values`' dtype) among the pool's values?"""
    if not pool or values.numel() == 0:
        return torch.zeros(values.shape, dtype=torch.bool)
    cast = torch.cat([p.reshape(-1).to(values.dtype) for p in pool])
    bits = _UINT[values.element_size()]
    return torch.isin(values.reshape(-1).view(bits), cast.view(bits))


def kernel_written_values(call: CallRecord, upto: int | None = None) -> list[torch.Tensor]:
    """The float values kernels stored (changed bytes) in launches [0, upto) of the call."""
    pool: list[torch.Tensor] = []
    for log in call.logs[:upto]:
        for pre, post, dt in zip(log.pre, log.post, log.dtypes, strict=True):
            after = _values(post, dt)
            before = _values(pre, dt)
            if after is None or before is None or after.numel() != before.numel():
                continue
            bits = _UINT[after.element_size()]
            pool.append(after[after.view(bits) != before.view(bits)])
    return pool


def _written_mask(logs: list[tuple[LaunchLog, int]], itemsize: int, n: int) -> torch.Tensor:
    mask = torch.zeros(n, dtype=torch.bool)
    for log, j in logs:
        pre, post = _elements(log.pre[j], itemsize), _elements(log.post[j], itemsize)
        if pre.numel() == n and post.numel() == n:
            mask |= pre != post
    return mask


def _resolve_by_replay(
    device: MtiaDevice, logs: list[tuple[LaunchLog, int]], itemsize: int, positions: torch.Tensor
) -> torch.Tensor:
    """Of the storage elements at `positions`, those no launch stores to (replayed with poison)."""
    left = positions
    for log, j in reversed(logs):
        if left.numel() == 0:
            break
        poison = ~_elements(log.pre[j], itemsize)[left]
        try:  # the device poisons and reads its own copy (no copy of the storage)
            after = device.replay_poisoned(log, j, left.numpy(), poison.numpy())
        except Exception:  # a kernel that fails on poisoned data did not just store to it
            continue
        left = left[torch.from_numpy(np.asarray(after)) == poison]
    return left


def check_outputs(
    device: MtiaDevice, call: CallRecord, metas: list[dict[str, Any]], outs: list[torch.Tensor]
) -> str | None:
    """None if every output element was written by a kernel during the call, else why not."""
    if call.errors:
        return None  # a failed launch: the outputs' correctness decides
    for i, (meta, out) in enumerate(zip(metas, outs, strict=True)):
        if out.numel() == 0:
            continue
        label = f"output {i}" if len(outs) > 1 else "output"
        why = _check_one(device, call, meta, out, label)
        if why:
            return why
    return None


def _check_one(
    device: MtiaDevice, call: CallRecord, meta: dict[str, Any], out: torch.Tensor, label: str
) -> str | None:
    key = meta.get("key")
    logs = [(log, log.keys.index(key)) for log in call.logs if key in log.keys]
    itemsize = out.element_size()
    returned = out.reshape(-1).view(_UINT[itemsize]) if out.dim() else out.reshape(1).view(_UINT[itemsize])
    if logs:
        final = _elements(logs[-1][0].post[logs[-1][1]], itemsize)
        try:
            idx = _view_index(int(meta["offset"]), list(meta["strides"]), list(meta["shape"]))
        except (KeyError, TypeError, ValueError, RuntimeError):
            idx = torch.empty(0, dtype=torch.int64)
        if _index_fits(idx, returned.numel(), final.numel()):
            if not torch.equal(final[idx], returned):
                bad = int((final[idx] != returned).sum())
                return (
                    f"{label}: {bad} of {returned.numel()} elements differ from what the kernels left in "
                    "that buffer on the device (the host changed the output after the kernels ran)"
                )
            written = _written_mask(logs, itemsize, final.numel())
            if isinstance(idx, slice):
                ambiguous = (~written[idx]).nonzero().reshape(-1) + int(idx.start)
            else:
                ambiguous = torch.unique(idx[~written[idx]])
            if ambiguous.numel():
                ambiguous = _resolve_by_replay(device, logs, itemsize, ambiguous)
            if ambiguous.numel():
                return (
                    f"{label}: {ambiguous.numel()} of {returned.numel()} elements were not written by any "
                    "kernel launched during this call (computed on the host, or left from an earlier call)"
                )
            return None
    # Not a storage the kernels used: a host copy of kernel results is fine, anything else is not.
    values = out.reshape(-1)
    if not call.logs:
        return f"{label} was not written by any kernel: no kernel was launched during this call"
    if not values.is_floating_point():
        if _int_output_copied(call, values):
            return None
        return f"{label} was not written by any kernel launched during this call"
    members = _isin(values, kernel_written_values(call))
    if not bool(members.all()):
        missing = int((~members).sum())
        return (
            f"{label}: {missing} of {values.numel()} elements were not written by any kernel launched during "
            "this call (host computation, or memory no kernel touched)"
        )
    return None


def _index_fits(idx: torch.Tensor | slice, count: int, size: int) -> bool:
    """Whether `idx` names `count` elements, all inside a storage of `size` elements."""
    if isinstance(idx, slice):
        return idx.stop - idx.start == count and 0 <= idx.start and idx.stop <= size
    return idx.numel() == count and (idx.numel() == 0 or 0 <= int(idx.min()) <= int(idx.max()) < size)


def _int_output_copied(call: CallRecord, values: torch.Tensor) -> bool:
    pool: list[torch.Tensor] = []
    for log in call.logs:
        for post, dt in zip(log.post, log.dtypes, strict=True):
            dtype = DTYPES.get(dt or "")
            if dtype is not None and not dtype.is_floating_point:
                pool.append(_elements(post, torch.empty((), dtype=dtype).element_size()).view(dtype))
    return bool(_isin(values, pool).all())


def check_host_data(
    call: CallRecord,
    known: dict[int, Buffer],
    allowed: list[torch.Tensor],
    input_blobs: list[Buffer],
    outs: list[torch.Tensor],
) -> str | None:
    """None unless the outputs copy values the host computed during the call (see the module doc).

    `known`: each storage's bytes as the device last left them (updated here); `allowed`: values
    the host may legitimately hold (the call's inputs, the model's tensors after construction).
    """
    host_values: list[torch.Tensor] = []
    for n, log in enumerate(call.logs):
        written_before: list[torch.Tensor] | None = None
        for key, pre, post, dt in zip(log.keys, log.pre, log.post, log.dtypes, strict=True):
            prior = known.get(key)
            known[key] = post
            if (prior is not None and same_bytes(pre, prior)) or any(same_bytes(pre, b) for b in input_blobs):
                continue
            before, after = _values(pre, dt), _values(post, dt)
            if before is None or after is None or before.numel() != after.numel():
                continue
            bits = _UINT[before.element_size()]
            mask = before.view(bits) == after.view(bits)  # left unchanged by the kernel
            if prior is not None and as_u8(prior).size == as_u8(pre).size:
                old = _values(prior, dt)
                assert old is not None
                mask &= old.view(bits) != before.view(bits)  # and new since the device last saw it
            fresh = before[mask]
            fresh = fresh[torch.isfinite(fresh.double()) & (fresh != 0) & (fresh.abs() != 1)]  # fills pass
            if fresh.numel() == 0:
                continue
            if written_before is None:
                written_before = kernel_written_values(call, n)
            fresh = fresh[~_isin(fresh, allowed + written_before)]
            if fresh.numel():
                host_values.append(fresh)
    if not host_values:
        return None
    for i, out in enumerate(outs):
        if not out.is_floating_point() or out.numel() < MIN_COPIED:
            continue
        vals = out.reshape(-1)
        vals = vals[vals != 0]
        if vals.numel() < MIN_COPIED:
            continue
        copied = float(_isin(vals, host_values).float().mean())
        if copied > COPIED_FRACTION:
            label = f"output {i}" if len(outs) > 1 else "output"
            return (
                f"{label}: {100 * copied:.0f}% of its values are data the host produced during the call and "
                "a kernel only copied (host computation fed through a kernel)"
            )
    return None


def prune_known(known: dict[int, Buffer], call: CallRecord) -> None:
    """Forget storages the last call did not use (the host may have freed them)."""
    used = {k for log in call.logs for k in log.keys}
    for k in [k for k in known if k not in used]:
        del known[k]
