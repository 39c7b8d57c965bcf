#!/usr/bin/env bash
# The whole test command: lint (ruff), the architecture rules (module budget, folder size, layering,
# no import cycles: tools/check_architecture.py), types (mypy), then the test suite (pytest, spread
# over the machine's cores by pytest-xdist: at most 4 workers, KEGEN_TEST_WORKERS=N to choose; 0 runs
# the tests in this process; `worksteal` balances the long tests: 17:56 against 19:18 with `load`).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check kegen lowering mtia_sim tests tools
.venv/bin/python tools/check_architecture.py
.venv/bin/mypy
nproc_=$(nproc)
workers="${KEGEN_TEST_WORKERS:-$((nproc_ < 4 ? nproc_ : 4))}"
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist worksteal "$@"
