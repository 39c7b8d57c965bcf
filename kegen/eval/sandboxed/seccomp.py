"""Seccomp filters for the candidate's sandbox.

`unix_socket_filter` (the whole sandbox, through `bwrap --seccomp`): no new AF_UNIX sockets.

bubblewrap's network namespace cuts the network and abstract unix sockets, but a path-based unix
socket of the host stays reachable through the read-only view of the file system (connecting
needs no write access to the file system). The worker never needs to create one (its channel to
the evaluator is inherited), so `socket(AF_UNIX, ...)` fails with EPERM. The filter is a classic
BPF program for x86-64 (other ABIs on x86-64 — i386, x32 — are refused outright); on other
architectures no filter is installed (see docs/THREAT_MODEL.md).

`worker_filter` (each candidate worker, installed by `kegen.eval.sandboxed.isolate.lock_down`
after its namespaces are set up, before candidate code): on top of that, no ptrace, no
process_vm_readv/writev, kcmp or pidfd_getfd (no way into another process's memory), no mount,
umount, pivot_root, chroot, unshare, setns or the new mount API (the private /tmp cannot be
uncovered), clone with namespace flags refused, clone3 ENOSYS (libc falls back to clone, whose
flags a classic filter can read), no keyrings (shared by the uid), bpf, perf_event_open,
userfaultfd or io_uring.
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
RET_ERRNO_ENOSYS = 0x00050000 | 38

# BPF opcodes
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
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


# x86-64 system call numbers the worker is refused (EPERM)
WORKER_DENIED = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}
NR_CLONE = 56
NR_CLONE3 = 435
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000


def worker_filter() -> bytes | None:
    """The candidate worker's filter (see the module docstring), or None off x86-64 Linux."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    prog = [
        _insn(LD_W_ABS, 0, 0, 4),  # arch
        _insn(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),
        _insn(LD_W_ABS, 0, 0, 0),  # syscall number
        _insn(JGE_K, 0, 1, X32_BIT),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),
    ]
    for nr in sorted(WORKER_DENIED.values()):
        prog += [_insn(JEQ_K, 0, 1, nr), _insn(RET_K, 0, 0, RET_ERRNO_EPERM)]
    prog += [_insn(JEQ_K, 0, 1, NR_CLONE3), _insn(RET_K, 0, 0, RET_ERRNO_ENOSYS)]
    prog += [  # clone: refused with any namespace flag (args[0], low 32 bits)
        _insn(JEQ_K, 0, 4, NR_CLONE),
        _insn(LD_W_ABS, 0, 0, 16),
        _insn(JSET_K, 0, 1, CLONE_NAMESPACES),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),
        _insn(RET_K, 0, 0, RET_ALLOW),
    ]
    prog += [  # socket(AF_UNIX, ...)
        _insn(JEQ_K, 0, 4, NR_SOCKET_X86_64),
        _insn(LD_W_ABS, 0, 0, 16),
        _insn(JEQ_K, 0, 1, AF_UNIX),
        _insn(RET_K, 0, 0, RET_ERRNO_EPERM),
        _insn(RET_K, 0, 0, RET_ALLOW),
    ]
    prog.append(_insn(RET_K, 0, 0, RET_ALLOW))
    return b"".join(prog)
