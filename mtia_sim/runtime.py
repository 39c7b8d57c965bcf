"""Built-in C-library routines an image may call (memcpy, memset, memmove), compiled once from LLVM IR."""

from __future__ import annotations

import functools

RUNTIME_IR = r"""
define ptr @memcpy(ptr %d, ptr %s, i64 %n) #0 {
entry:
  %z = icmp eq i64 %n, 0
  br i1 %z, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %sp = getelementptr i8, ptr %s, i64 %i
  %dp = getelementptr i8, ptr %d, i64 %i
  %b = load volatile i8, ptr %sp
  store volatile i8 %b, ptr %dp
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret ptr %d
}

define ptr @memmove(ptr %d, ptr %s, i64 %n) #0 {
entry:
  %di = ptrtoint ptr %d to i64
  %si = ptrtoint ptr %s to i64
  %fwd = icmp ule i64 %di, %si
  br i1 %fwd, label %f, label %back
f:
  %r = call ptr @memcpy(ptr %d, ptr %s, i64 %n)
  ret ptr %d
back:
  %z = icmp eq i64 %n, 0
  br i1 %z, label %done, label %loop
loop:
  %i = phi i64 [%n, %back], [%i1, %loop]
  %i1 = sub i64 %i, 1
  %sp = getelementptr i8, ptr %s, i64 %i1
  %dp = getelementptr i8, ptr %d, i64 %i1
  %b = load volatile i8, ptr %sp
  store volatile i8 %b, ptr %dp
  %c = icmp ne i64 %i1, 0
  br i1 %c, label %loop, label %done
done:
  ret ptr %d
}

define ptr @memset(ptr %d, i32 %v, i64 %n) #0 {
entry:
  %b = trunc i32 %v to i8
  %z = icmp eq i64 %n, 0
  br i1 %z, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %dp = getelementptr i8, ptr %d, i64 %i
  store volatile i8 %b, ptr %dp
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret ptr %d
}

attributes #0 = { nounwind "no-builtins" }
"""


@functools.cache
def runtime_object() -> bytes:
    """The runtime routines as a relocatable RISC-V object (compiled at first use, then cached)."""
    from mtia_sim.rvcompile import compile_ir

    return compile_ir(RUNTIME_IR, opt=1)
