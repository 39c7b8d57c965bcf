"""Per-worker isolation: every candidate worker starts in fresh namespaces with private, capped
/tmp, /dev/shm and /run and a read-only view of everything else (issue 23, docs/THREAT_MODEL.md).

The zygote (`kegen.eval.sandboxed.zygote`) never runs candidate code. For each job it forks a
keeper K (trusted code only), which calls `enter()`: new user, mount, IPC, UTS, network and PID
namespaces, the uid/gid mapped to themselves, every inherited mount made read-only, fresh tmpfs on
/tmp, /dev/shm and /run, and the paths the worker must still read under /tmp (the candidate inbox,
code under /tmp) bound back read-only. K then forks the worker W, pid 1 of its own PID namespace
(whatever W starts dies with it; W cannot see or signal the zygote or K), and W calls `lock_down()`
before any candidate code: a fresh /proc where possible, no capabilities, no new privileges, not
dumpable, and the seccomp filter of `kegen.eval.sandboxed.seccomp.worker_filter` (no ptrace,
process_vm_*, mount or namespace calls). Everything here is best effort: what could not be done is
returned as a list of sentences for the result's details.
"""

from __future__ import annotations

import ctypes
import os
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

NR_MOUNT_SETATTR = 442  # x86-64 and the generic table
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
NR_CAPSET = 126
LINUX_CAPABILITY_VERSION_3 = 0x20080522

PRIVATE_DIRS = ("/tmp", "/dev/shm", "/run")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _readonly_everything() -> None:
    """Every mount inherited from the sandbox (or the host) read-only, recursively."""
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    rc = _libc.syscall(NR_MOUNT_SETATTR, -100, b"/", AT_RECURSIVE, buf, len(attr))  # AT_FDCWD
    _check(rc, "mount_setattr / read-only")


def enter(tmp_bytes: int, shm_bytes: int, keep: list[str]) -> list[str]:
    """In a single-threaded process: new namespaces and private file systems (see the module
    docstring). `keep`: paths under /tmp to bind back read-only. Returns what could not be done;
    raises OSError when no namespace at all could be made (nothing of this then holds)."""
    lost: list[str] = []
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID
    if _libc.unshare(flags | CLONE_NEWNET) != 0:
        _check(_libc.unshare(flags), "unshare")
        lost.append("no network namespace per worker")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    fds = {}
    for path in keep:
        try:
            fds[path] = os.open(path, os.O_PATH)
        except OSError:
            pass
    try:
        _readonly_everything()
    except OSError as exc:
        lost.append(f"the inherited file system stays as it was ({exc.strerror})")
    sizes = {"/tmp": tmp_bytes, "/dev/shm": shm_bytes, "/run": 16 * 1024 * 1024}
    for target in PRIVATE_DIRS:
        if not os.path.isdir(target):
            continue
        try:
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={sizes[target]},mode=1777")
        except OSError as exc:
            lost.append(f"no private {target} ({exc.strerror})")
    for path, fd in fds.items():
        try:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()  # noqa: SIM115 - a mount point
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError as exc:
            lost.append(f"{path} not visible to the worker ({exc.strerror})")
        finally:
            os.close(fd)
    return lost


def _capset_none() -> None:
    header = ctypes.create_string_buffer(struct.pack("Ii", LINUX_CAPABILITY_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(bytes(24), 24)  # two {effective, permitted, inheritable}
    _check(_libc.syscall(NR_CAPSET, header, data), "capset")


class _FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program: bytes) -> None:
    """Install a classic-BPF seccomp filter on this process (and everything it starts)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _FProg(len(program) // 8, ctypes.addressof(buf))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def lock_down(new_proc: bool, seccomp: bool = True) -> list[str]:
    """In the worker before candidate code: fresh /proc (when `new_proc`, in its own PID
    namespace), no capabilities, not dumpable, no new privileges, the worker's seccomp filter
    (unless `seccomp` is False: GPU workers, whose driver calls it would refuse)."""
    from kegen.eval.sandboxed.seccomp import worker_filter

    lost: list[str] = []
    if new_proc:
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as exc:
            lost.append(f"/proc shows the sandbox's processes ({exc.strerror}; they are not dumpable)")
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    try:
        _capset_none()
    except OSError as exc:
        lost.append(f"capabilities kept in the worker's own namespaces ({exc.strerror})")
    program = worker_filter() if seccomp else None
    if program is None and not seccomp:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    elif program is None:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        lost.append("no seccomp filter on this architecture (ptrace is refused by dumpability only)")
    else:
        install_filter(program)
    return lost


def set_dumpable(flag: bool) -> None:
    """PR_SET_DUMPABLE for this process (0: no ptrace, no /proc/<pid>/mem by same-uid processes)."""
    _libc.prctl(PR_SET_DUMPABLE, 1 if flag else 0, 0, 0, 0)
