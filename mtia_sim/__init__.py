"""mtia_sim: a cycle-approximate simulator of an MTIA-style 8×8-PE accelerator, built on Unicorn."""
