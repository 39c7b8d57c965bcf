"""The sandboxed side of an evaluation: code that runs in the zygote and the candidate's worker W.

It imports only the shared modules of `kegen.eval` (and torch, Triton, lowering), never
`kegen.eval.trusted`: nothing E relies on is reachable from the candidate's process
(tests/eval/test_layout.py).
"""
