"""The doorbell fast path (D20): a command seen before runs in native code inside its MMIO store.

- `doorbells`: `FastDoorbells`, the plan table, op records and event queue of one core;
- `encode`: a native op (copy, fill, numpy ufunc) as an op record; `ufuncs`: numpy's inner loops;
- `reloc`: relocatable plans (one plan serves descriptors that differ only in their addresses);
- `ir`, `ops_ir`: the LLVM IR JIT-compiled for the host; `layout`: the int64 word layout both
  sides share.

Importers name the module they need (`from mtia_sim.fastpath.doorbells import FastDoorbells`);
this package imports nothing.
"""
