"""Framed messages over a stream socket: the wire of the out-of-process mtia device and of kegen's
evaluation protocol.

A frame is a JSON header (plain data only: dicts, lists, strings, numbers) followed by binary
blobs. Layout: 8-byte magic+lengths prefix `b"KG"`, u16 blob count, u32 header length, then the
header, then per blob a u64 length and its bytes. Nothing is ever unpickled: a peer can send only
JSON values and byte strings, so a hostile peer can lie about values but cannot run code in the
receiver. Sizes are bounded (`max_header`, `max_total`) so a peer cannot exhaust memory by lying
about lengths.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any

MAGIC = b"KG"
_PREFIX = struct.Struct("<2sHI")
_BLOB_LEN = struct.Struct("<Q")
MAX_HEADER = 16 * 1024 * 1024
MAX_BLOBS = 4096


class WireError(RuntimeError):
    """The peer sent a malformed frame, too much data, or closed the connection."""


def send_frame(sock: socket.socket, header: dict[str, Any], blobs: Sequence[Any] = ()) -> None:
    """Send one frame (header JSON + blobs: bytes, bytearrays, memoryviews or contiguous numpy
    arrays, sent from their memory without a copy)."""
    head = json.dumps(header, separators=(",", ":"), allow_nan=True).encode()
    if len(blobs) > MAX_BLOBS:
        raise WireError(f"too many blobs in one frame ({len(blobs)} > {MAX_BLOBS})")
    parts: list[bytes | memoryview] = [_PREFIX.pack(MAGIC, len(blobs), len(head)), head]
    for blob in blobs:
        view = memoryview(blob).cast("B")
        parts.append(_BLOB_LEN.pack(view.nbytes))
        parts.append(view)
    for part in parts:
        sock.sendall(part)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    _recv_into(sock, memoryview(buf))
    return buf


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got, n = 0, view.nbytes
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("the peer closed the connection")
        got += k


def recv_frame(
    sock: socket.socket,
    *,
    max_total: int = 1 << 40,
    into: Callable[[dict[str, Any], int, int], memoryview | None] | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """Receive one frame; raise WireError if it is malformed or larger than `max_total` bytes.

    Blobs arrive as bytearrays, or straight into the memory `into(header, i, nbytes)` names for
    blob i (a writable byte view of exactly `nbytes`; None: a new bytearray)."""
    magic, count, head_len = _PREFIX.unpack(bytes(_recv_exact(sock, _PREFIX.size)))
    if magic != MAGIC or count > MAX_BLOBS or head_len > MAX_HEADER:
        raise WireError("malformed frame header from the peer")
    try:
        header = json.loads(bytes(_recv_exact(sock, head_len)))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"the peer sent a header that is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise WireError("the peer's frame header is not a JSON object")
    total = head_len
    blobs: list[Any] = []
    for _ in range(count):
        (n,) = _BLOB_LEN.unpack(bytes(_recv_exact(sock, _BLOB_LEN.size)))
        total += n
        if total > max_total:
            raise WireError(f"the peer sent more than {max_total} bytes in one frame")
        dest = into(header, len(blobs), n) if into is not None else None
        if dest is not None and dest.nbytes == n:
            _recv_into(sock, dest)
            blobs.append(dest)
        else:
            blobs.append(_recv_exact(sock, n))
    return header, blobs
