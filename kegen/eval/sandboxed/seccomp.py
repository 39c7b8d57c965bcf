"""A seccomp filter for the candidate's sandbox: no new AF_UNIX sockets.

bubblewrap's network namespace cuts the network and abstract unix sockets, but a path-based unix
socket of the host stays reachable through the read-only view of the file system (connecting
needs no write access to the file system). The worker never needs to create one (its channel to
the evaluator is inherited), so `socket(AF_UNIX, ...)` fails with EPERM. The filter is a classic
BPF program for x86-64 (other ABIs on x86-64 — i386, x32 — are refused outright); on other
architectures no filter is installed (see docs/THREAT_MODEL.md).
"""

from __future__ import annotations

import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
NR_SOCKET_X86_64 = 41
X32_BIT = 0x40000000
AF_UNIX = 1
RET_ALLOW = 0x7FFF0000
RET_ERRNO_EPERM = 0x00050000 | 1

# BPF opcodes
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
RET_K = 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def unix_socket_filter() -> bytes | None:
    """The filter as bytes for `bwrap --seccomp FD`, or None where it is not available."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    prog = [
        _insn(LD_W_ABS, 0, 0, 4),  # arch
        _insn(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),  # i386 ABI: refused
        _insn(LD_W_ABS, 0, 0, 0),  # syscall number
        _insn(JGE_K, 0, 1, X32_BIT),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),  # x32 ABI: refused
        _insn(JEQ_K, 0, 3, NR_SOCKET_X86_64),
        _insn(LD_W_ABS, 0, 0, 16),  # args[0] (low 32 bits): the address family
        _insn(JEQ_K, 0, 1, AF_UNIX),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),
        _insn(RET_K, 0, 0, RET_ALLOW),
    ]
    return b"".join(prog)
