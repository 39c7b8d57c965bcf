"""Tensors and Python scalars as plain data for the evaluation protocol (no pickle, no subclasses).

A tensor travels as a JSON description (dtype name from a fixed table, shape, and where it lives
in the sender: storage address, storage offset, strides — provenance hints the receiver may check
but never trusts) plus its values as one contiguous byte string. The receiver rebuilds a plain
`torch.Tensor` from the bytes: whatever class the sender's object had, only its bytes arrive.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch

from lowering.backend.device_wire import WireError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
}
MAX_DIMS = 16


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def encode_values(values: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Encode a list of tensors and JSON scalars; tensors go as their bytes (moved to the CPU; a
    contiguous CPU tensor's bytes are a view of its memory, valid while it is unchanged)."""
    metas: list[dict[str, Any]] = []
    blobs: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            meta, blob = encode_tensor(v)
            meta["blob"] = len(blobs)
            metas.append(meta)
            blobs.append(blob)
        elif v is None or isinstance(v, bool | int | float | str):
            metas.append({"py": v})
        elif isinstance(v, list | tuple) and all(isinstance(x, bool | int | float) for x in v):
            metas.append({"py": list(v)})
        else:
            raise TypeError(f"cannot send a {type(v).__name__} to the candidate (tensors and scalars only)")
    return metas, blobs


def encode_tensor(t: torch.Tensor) -> tuple[dict[str, Any], Any]:
    """(description, contiguous bytes) of one tensor; the description records where it lived."""
    name = dtype_name(t.dtype)
    if name not in DTYPES:
        raise TypeError(f"tensor dtype {t.dtype} is not supported by the evaluation protocol")
    base = (
        torch.Tensor._make_subclass(torch.Tensor, t.detach()) if type(t) is not torch.Tensor else t.detach()
    )
    try:
        key = int(base.untyped_storage().data_ptr())
        offset, strides = int(base.storage_offset()), [int(s) for s in base.stride()]
    except (RuntimeError, NotImplementedError):
        key, offset, strides = 0, 0, []
    cpu = base.contiguous().cpu() if base.device.type != "cpu" else base.contiguous()
    meta = {
        "dtype": name,
        "shape": [int(s) for s in base.shape],
        "device": base.device.type,
        "key": key,
        "offset": offset,
        "strides": strides,
    }
    data = cpu.view(torch.uint8).numpy().reshape(-1) if cpu.numel() and cpu.dim() else _scalar_bytes(cpu)
    return meta, data


def _scalar_bytes(t: torch.Tensor) -> bytes:
    return t.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""


def decode_values(metas: list[Any], blobs: list[bytearray], device: str = "cpu") -> list[Any]:
    """Inverse of `encode_values`; raise WireError on anything malformed."""
    if not isinstance(metas, list):
        raise WireError("values must be a list")
    out: list[Any] = []
    used: set[int] = set()
    for meta in metas:
        if not isinstance(meta, dict):
            raise WireError("a value description must be an object")
        if "py" in meta:
            out.append(meta["py"])
            continue
        index = meta.get("blob")
        if not isinstance(index, int) or not 0 <= index < len(blobs):
            raise WireError("a tensor description names a missing blob")
        blob = blobs[index]
        out.append(decode_tensor(meta, blob if index not in used else bytes(blob), device))
        used.add(index)  # a blob named twice: the second tensor gets its own copy (no aliasing)
    return out


def decode_tensor(meta: dict[str, Any], blob: Any, device: str = "cpu") -> torch.Tensor:
    """A plain tensor from its description and bytes (checked: dtype, shape, byte count); a received
    bytearray becomes the tensor's memory (the caller hands it over), anything else is copied."""
    dtype = DTYPES.get(str(meta.get("dtype")))
    shape = meta.get("shape")
    if dtype is None:
        raise WireError(f"unsupported dtype {meta.get('dtype')!r}")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise WireError(f"bad shape {shape!r}")
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    nbytes = memoryview(blob).nbytes
    if nbytes != numel * itemsize:
        raise WireError(
            f"tensor of shape {shape} and dtype {meta['dtype']} needs {numel * itemsize} bytes, got {nbytes}"
        )
    if numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        own = blob if isinstance(blob, bytearray) else bytearray(blob)
        t = torch.frombuffer(own, dtype=torch.uint8).view(dtype).reshape(shape)
    return t.to(device) if device != "cpu" else t


def tensor_u8(t: torch.Tensor) -> Any:
    """The tensor's bytes as a uint8 numpy array (a view when it is contiguous on the CPU)."""
    return t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy()


def outputs_digest(outs: list[torch.Tensor]) -> str:
    """A digest of outputs' dtypes, shapes and bytes: equal digests = bitwise identical outputs."""
    h = hashlib.sha256()  # hardware-accelerated where CPUs have SHA extensions
    for o in outs:
        h.update(f"{o.dtype}{tuple(o.shape)};".encode())
        h.update(memoryview(tensor_u8(o)))
    return h.hexdigest()
