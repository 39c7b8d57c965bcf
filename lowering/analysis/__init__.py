"""Facts about tile-IR ops that both the passes and the code generator read (not passes themselves):
`accumulate` (which atomics become RED_ACCUMULATE over the reduction network)."""
