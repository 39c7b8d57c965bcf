"""Tensors that live in another process's device memory: shape, dtype, strides and an address, no bytes.

Under `kegen eval --target mtia` the candidate's process never holds problem data. Its tensors
are `DeviceTensor`s: a torch wrapper subclass over a meta tensor (which does the shape, stride and
offset arithmetic of views) plus a `DeviceStorage` handle in the evaluator's device memory.

- Metadata ops work as on any tensor: view, reshape, permute, transpose, expand, as_strided,
  slicing, squeeze/unsqueeze, `view(dtype)`, `empty`/`empty_like`/`new_empty`/`empty_strided`.
- Device-side data movement is forwarded to the device (and charged there): `clone`,
  `contiguous`, `copy_`, `.to(dtype)`, `fill_`/`zero_`, `zeros`/`ones`/`full(_like)`.
- Anything that would read or compute on the data in this process (arithmetic, reductions,
  indexing by data, `.item()`, `.cpu()`, `.numpy()`, `.tolist()`, printing values) raises
  `DeviceDataError` naming the op.

The guarantee does not rest on this class: the bytes are in the evaluator's process, and the
protocol has no way to read them back (see docs/THREAT_MODEL.md). This class only makes honest
candidates work unchanged and gives hostile ones a clear error.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten
STORAGE_ALIGN = 4096
_VADDR_BASE = 1 << 40  # candidate-side addresses: only for alignment specialisation and offsets


class DeviceDataError(RuntimeError):
    """A torch op tried to read or compute on device data inside the candidate's process."""

    def __init__(self, op: str, hint: str = "write it as a Triton kernel") -> None:
        self.op = op
        super().__init__(
            f"{op} on device data in the candidate: {hint} (on mtia the candidate's process holds "
            "device tensors -- shape, dtype, strides and an address -- never their values)"
        )


class DeviceBackend(Protocol):
    """What a DeviceTensor needs from the device connection (`device_client.RemoteDevice`)."""

    def alloc(self, nbytes: int) -> DeviceStorage: ...
    def fill(self, dst: DeviceTensor, value: float | int | bool) -> None: ...
    def copy(self, dst: DeviceTensor, src: DeviceTensor) -> None: ...
    def upload(self, dst: DeviceTensor, host: torch.Tensor) -> None: ...
    def free(self, handle: int) -> None: ...


class DeviceStorage:
    """A block of device memory: its handle, size and a candidate-side address (4 KiB aligned)."""

    _next_vaddr = _VADDR_BASE
    _lock = threading.Lock()

    def __init__(self, handle: int, nbytes: int, backend: DeviceBackend | None, owned: bool = True) -> None:
        self.handle, self.nbytes, self.backend = int(handle), int(nbytes), backend
        with DeviceStorage._lock:
            self.vaddr = DeviceStorage._next_vaddr
            DeviceStorage._next_vaddr += (-(-max(self.nbytes, 1) // STORAGE_ALIGN) + 1) * STORAGE_ALIGN
        self.owned = owned  # freed on the device when the last tensor over it is gone

    def __del__(self) -> None:
        if self.owned and self.backend is not None:
            try:
                self.backend.free(self.handle)
            except Exception:  # interpreter shutdown: the device frees everything at the end anyway
                pass


def _dtype_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


class DeviceTensor(torch.Tensor):
    """A tensor whose bytes live on the evaluator's device (see the module docstring)."""

    _meta: torch.Tensor
    _storage: DeviceStorage
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @staticmethod
    def __new__(cls, meta: torch.Tensor, storage: DeviceStorage) -> DeviceTensor:
        out = torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined]
            cls,
            meta.shape,
            strides=meta.stride(),
            storage_offset=meta.storage_offset(),
            dtype=meta.dtype,
            device=torch.device("cpu"),
            requires_grad=False,
        )
        out._meta, out._storage = meta, storage
        return out

    @classmethod
    def on_storage(
        cls, storage: DeviceStorage, shape: Any, strides: Any, offset: int, dtype: torch.dtype
    ) -> DeviceTensor:
        """A view of `storage` (offset and strides in elements of `dtype`); bounds are checked."""
        itemsize = _dtype_size(dtype)
        shape, strides = [int(s) for s in shape], [int(s) for s in strides]
        if offset < 0 or any(s < 0 for s in shape) or any(s < 0 for s in strides):
            raise ValueError("device tensor with a negative offset, size or stride")
        if math.prod(shape):
            last = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
            if (last + 1) * itemsize > storage.nbytes:
                raise ValueError(
                    f"device tensor {tuple(shape)} (strides {tuple(strides)}, offset {offset}) reaches past "
                    f"its storage of {storage.nbytes} bytes"
                )
        meta_store = torch.empty(max(1, storage.nbytes // itemsize), dtype=dtype, device="meta")
        meta = meta_store.as_strided(shape, strides, offset)
        return cls(meta, storage)

    # --- what a Triton launch and the evaluator read ---------------------------------------------
    def data_ptr(self) -> int:  # type: ignore[override]
        return self._storage.vaddr + int(self._meta.storage_offset()) * self.element_size()

    @property
    def device_handle(self) -> int:
        return self._storage.handle

    @property
    def device_byte_offset(self) -> int:
        return int(self._meta.storage_offset()) * self.element_size()

    def describe(self) -> dict[str, Any]:
        """This tensor as plain data: storage handle, element offset, shape, strides, dtype."""
        return {
            "dev": self._storage.handle,
            "offset": int(self._meta.storage_offset()),
            "shape": [int(s) for s in self.shape],
            "strides": [int(s) for s in self.stride()],
            "dtype": str(self.dtype).removeprefix("torch."),
        }

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return (
            f"DeviceTensor(shape={tuple(self.shape)}, dtype={self.dtype}, strides={tuple(self.stride())}, "
            f"device address={self.data_ptr():#x})"
        )

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    # --- host access: refused with a clear error ------------------------------------------------------
    def numpy(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise DeviceDataError("Tensor.numpy()", "device data cannot be read by the candidate")

    def tolist(self) -> Any:  # type: ignore[override]
        raise DeviceDataError("Tensor.tolist()", "device data cannot be read by the candidate")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise DeviceDataError("numpy.asarray(tensor)", "device data cannot be read by the candidate")

    def untyped_storage(self) -> Any:  # type: ignore[override]
        raise DeviceDataError("Tensor.untyped_storage()", "device memory is not addressable by the candidate")

    def storage(self) -> Any:  # type: ignore[override]
        raise DeviceDataError("Tensor.storage()", "device memory is not addressable by the candidate")

    def __reduce_ex__(self, proto: Any) -> Any:
        raise DeviceDataError("pickling a tensor", "device data cannot be read by the candidate")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise DeviceDataError("Tensor.__dlpack__()", "device data cannot be read by the candidate")

    # --- torch ops ----------------------------------------------------------------------------------
    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        return dispatch(func, args, kwargs or {})


def _backend_of(args: Any) -> DeviceBackend:
    for a in tree_flatten(args)[0]:
        if isinstance(a, DeviceTensor) and a._storage.backend is not None:
            return a._storage.backend
    raise DeviceDataError("a device op", "no device connection")


def _unwrap(x: Any) -> Any:
    return x._meta if isinstance(x, DeviceTensor) else x


def _is_host_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and not isinstance(x, DeviceTensor)


def _op_name(func: Any) -> str:
    return f"aten.{func.__name__}" if hasattr(func, "__name__") else str(func)


def _view(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """A view op: run it on the meta tensors; the results share the first device tensor's storage."""
    base = next(a for a in tree_flatten(args)[0] if isinstance(a, DeviceTensor))
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    return tree_map(lambda o: DeviceTensor(o, base._storage) if isinstance(o, torch.Tensor) else o, out)


def new_device_tensor(
    backend: DeviceBackend, shape: Any, dtype: torch.dtype, strides: Any | None = None
) -> DeviceTensor:
    """Fresh device memory for a tensor of `shape` (contiguous unless `strides` is given)."""
    meta = (
        torch.empty_strided(shape, strides, dtype=dtype, device="meta")
        if strides is not None
        else torch.empty(shape, dtype=dtype, device="meta")
    )
    span = 0
    if meta.numel():
        span = 1 + sum((n - 1) * s for n, s in zip(meta.shape, meta.stride(), strict=True))
    storage = backend.alloc(span * meta.element_size())
    return DeviceTensor(meta, storage)


def _like(x: DeviceTensor, kwargs: dict[str, Any]) -> DeviceTensor:
    """Fresh device memory shaped like `x` (its strides kept where torch's empty_like keeps them)."""
    fmt = kwargs.get("memory_format")
    keep = fmt in (None, torch.preserve_format) and _dense(x.shape, x.stride())
    assert x._storage.backend is not None
    return new_device_tensor(
        x._storage.backend, x.shape, kwargs.get("dtype") or x.dtype, x.stride() if keep else None
    )


def _dense(shape: Any, strides: Any) -> bool:
    """Whether the strides lay the elements out without gaps or overlaps (in some dim order)."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(shape, strides, strict=True) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _check_device_kwarg(func: Any, kwargs: dict[str, Any]) -> None:
    dev = kwargs.get("device")
    if dev is not None and torch.device(dev).type not in ("cpu", "meta"):
        raise DeviceDataError(_op_name(func), f"device {dev} is not the mtia device")


def dispatch(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """Every torch op that reaches a DeviceTensor."""
    packet = getattr(func, "overloadpacket", None)
    name = packet.__name__ if packet is not None else str(func)
    if getattr(func, "is_view", False) or packet in _ALIASING:
        return _view(func, args, kwargs)
    if packet in _METADATA:
        return func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    handler = _HANDLERS.get(packet)
    if handler is not None:
        return handler(func, args, kwargs)
    if name == "_local_scalar_dense":
        raise DeviceDataError(
            f"{_op_name(func)} (Tensor.item(), int(), float() or bool() of a tensor)",
            "device data cannot be read by the candidate",
        )
    if any(_is_host_tensor(a) for a in tree_flatten((args, kwargs))[0]):
        raise DeviceDataError(
            _op_name(func), "host and device tensors cannot be mixed; write it as a Triton kernel"
        )
    raise DeviceDataError(_op_name(func))


def _empty_like(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    _check_device_kwarg(func, kwargs)
    return _like(args[0], kwargs)


def _new_empty(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    _check_device_kwarg(func, kwargs)
    x, shape = args[0], args[1]
    strides = args[2] if len(args) > 2 else None
    return new_device_tensor(x._storage.backend, shape, kwargs.get("dtype") or x.dtype, strides)


def _filled_like(value: Callable[[Any, dict[str, Any]], Any]) -> Callable[..., Any]:
    def handler(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        _check_device_kwarg(func, kwargs)
        out = _like(args[0], kwargs)
        out._storage.backend.fill(out, value(args, kwargs))  # type: ignore[union-attr]
        return out

    return handler


def _new_filled(value: Callable[[Any], Any]) -> Callable[..., Any]:
    def handler(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        _check_device_kwarg(func, kwargs)
        x = args[0]
        out = new_device_tensor(x._storage.backend, args[1], kwargs.get("dtype") or x.dtype)
        out._storage.backend.fill(out, value(args))  # type: ignore[union-attr]
        return out

    return handler


def _fill_(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    dst, value = args[0], (args[1] if len(args) > 1 else 0)
    if isinstance(value, torch.Tensor):
        if isinstance(value, DeviceTensor) or value.numel() != 1:
            raise DeviceDataError(
                _op_name(func), "fill with a tensor reads data; write it as a Triton kernel"
            )
        value = value.item()
    _scalar(func, value)
    dst._storage.backend.fill(dst, value)
    return dst


def _scalar(func: Any, value: Any) -> None:
    if not isinstance(value, bool | int | float):
        raise DeviceDataError(_op_name(func), "only a Python number can fill device memory")


def _clone(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    src = args[0]
    out = _like(src, kwargs)
    src._storage.backend.copy(out, src)  # type: ignore[union-attr]
    return out


def _to_copy(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    src = args[0]
    dev = kwargs.get("device")
    target = torch.device(dev).type if dev is not None else None
    if target not in (None, "cpu") or kwargs.get("layout") not in (None, torch.strided):
        raise DeviceDataError(_op_name(func), "only dtype conversions run on the device")
    if target == "cpu" and kwargs.get("dtype") is None:
        raise DeviceDataError(
            f"{_op_name(func)} to the host (.cpu(), .to('cpu'))",
            "device data cannot be copied to the candidate",
        )
    out = new_device_tensor(src._storage.backend, src.shape, kwargs.get("dtype") or src.dtype)
    src._storage.backend.copy(out, src)
    return out


def _copy_(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    dst, src = args[0], args[1]
    if not isinstance(dst, DeviceTensor):
        raise DeviceDataError(
            f"{_op_name(func)} into a host tensor", "device data cannot be copied to the candidate"
        )
    backend = dst._storage.backend
    if isinstance(src, DeviceTensor):
        if tuple(src.shape) != tuple(dst.shape):
            src = src.expand(dst.shape)
        backend.copy(dst, src)  # type: ignore[union-attr]
    elif isinstance(src, torch.Tensor):
        backend.upload(dst, src.expand(dst.shape).to(dst.dtype).contiguous())  # type: ignore[union-attr]
    else:
        _scalar(func, src)
        backend.fill(dst, src)  # type: ignore[union-attr]
    return dst


def _cat(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """torch.cat of device tensors: one device copy per piece into fresh device memory."""
    pieces = [t for t in args[0] if t.numel() or t.dim() != 1]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not pieces or not all(isinstance(t, DeviceTensor) for t in pieces):
        raise DeviceDataError(_op_name(func), "torch.cat takes device tensors only on mtia")
    first = pieces[0]
    dim = dim % first.dim()
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in pieces)
    assert first._storage.backend is not None
    out = new_device_tensor(first._storage.backend, shape, first.dtype)
    start = 0
    for t in pieces:
        out.narrow(dim, start, t.shape[dim]).copy_(t)
        start += t.shape[dim]
    return out


_ALIASING = {aten.detach, aten.alias, aten.lift_fresh, aten._unsafe_view, aten._reshape_alias}
_METADATA = {aten.is_same_size, aten.sym_size, aten.sym_stride, aten.sym_numel, aten.sym_storage_offset}
_HANDLERS: dict[Any, Callable[..., Any]] = {
    aten.empty_like: _empty_like,
    aten.new_empty: _new_empty,
    aten.new_empty_strided: _new_empty,
    aten.zeros_like: _filled_like(lambda a, k: 0),
    aten.ones_like: _filled_like(lambda a, k: 1),
    aten.full_like: _filled_like(lambda a, k: a[1]),
    aten.new_zeros: _new_filled(lambda a: 0),
    aten.new_ones: _new_filled(lambda a: 1),
    aten.new_full: _new_filled(lambda a: a[2]),
    aten.fill_: _fill_,
    aten.zero_: _fill_,
    aten.clone: _clone,
    aten._to_copy: _to_copy,
    aten.copy_: _copy_,
    aten.cat: _cat,
}


class DeviceMode(TorchDispatchMode):
    """Active while the candidate's forward runs: tensors it allocates are device tensors.

    `empty`/`empty_strided` become fresh device memory, `zeros`/`ones`/`full` device memory filled
    on the device. Other ops on host tensors only (constants such as `arange`) stay on the host: a
    host tensor passed to a kernel is uploaded at the launch and charged at the host link's
    bandwidth. Ops that touch a device tensor go to `DeviceTensor.__torch_dispatch__`.
    """

    def __init__(self, backend: DeviceBackend) -> None:
        super().__init__()
        self.backend = backend

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if any(isinstance(a, DeviceTensor) for a in tree_flatten((args, kwargs))[0]):
            return dispatch(func, args, kwargs)
        packet = getattr(func, "overloadpacket", None)
        factory = _FACTORIES.get(packet)
        if factory is not None:
            _check_device_kwarg(func, kwargs)
            return factory(self.backend, args, kwargs)
        return func(*args, **kwargs)


def _factory_empty(backend: DeviceBackend, args: Any, kwargs: dict[str, Any]) -> DeviceTensor:
    return new_device_tensor(backend, args[0], kwargs.get("dtype") or torch.get_default_dtype())


def _factory_empty_strided(backend: DeviceBackend, args: Any, kwargs: dict[str, Any]) -> DeviceTensor:
    return new_device_tensor(backend, args[0], kwargs.get("dtype") or torch.get_default_dtype(), args[1])


def _factory_filled(value: Callable[[Any], Any]) -> Callable[..., DeviceTensor]:
    def make(backend: DeviceBackend, args: Any, kwargs: dict[str, Any]) -> DeviceTensor:
        fill = value(args)
        dtype = kwargs.get("dtype") or (
            torch.get_default_dtype()
            if isinstance(fill, float) or fill is None
            else torch.bool
            if isinstance(fill, bool)
            else torch.int64
        )
        out = new_device_tensor(backend, args[0], dtype)
        backend.fill(out, fill)
        return out

    return make


_FACTORIES: dict[Any, Callable[..., DeviceTensor]] = {
    aten.empty: _factory_empty,
    aten.empty_strided: _factory_empty_strided,
    aten.zeros: _factory_filled(lambda a: 0.0),
    aten.ones: _factory_filled(lambda a: 1.0),
    aten.full: _factory_filled(lambda a: a[1]),
}
