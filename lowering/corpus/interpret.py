"""Checking the corpus references with Triton's CPU interpreter (``TRITON_INTERPRET=1``).

The interpreter must be chosen before the kernels are decorated, so this runs in a fresh process:
``python -m lowering.corpus.interpret [NAME ...]`` prints one line per kernel and exits non-zero
when a kernel's result differs from its PyTorch reference.
"""

from __future__ import annotations

import os
import sys

#: Kernels whose interpreter result is known to be wrong (not the kernel's or the reference's fault).
INTERPRETER_BUGS = {
    "fp8_roundtrip": "Triton 3.6's interpreter rounds fp32 -> fp8e5 wrongly (-0.4927 gives -0.25, not -0.5)",
    "dot_scaled_mxfp8": "Triton 3.6's interpreter has no dot_scaled (InterpreterBuilder.create_dot_scaled)",
}


def main(argv: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 before running this module", file=sys.stderr)
        return 2
    from lowering.triton_interpreter import patch_scalar_index

    patch_scalar_index()
    from lowering.corpus import CORPUS

    names = argv or list(CORPUS)
    failed = 0
    for name in names:
        entry = CORPUS[name]
        if not entry.numeric or not entry.outputs or name in INTERPRETER_BUGS:
            print(f"skip {name}" + (f" ({INTERPRETER_BUGS[name]})" if name in INTERPRETER_BUGS else ""))
            continue
        try:
            errors = entry.check(seed=0)
            print(f"ok {name} " + " ".join(f"{k}={v:.2g}" for k, v in errors.items()))
        except Exception as exc:  # report every kernel, then fail
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
