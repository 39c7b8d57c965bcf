"""The trusted side of an evaluation: the evaluator process E (never runs candidate code).

It may import the shared modules of `kegen.eval` and `kegen.eval.sandboxed` (plain code it
runs itself); the sandboxed side never imports this package (tests/eval/test_layout.py).
"""
