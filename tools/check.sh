#!/usr/bin/env bash
# The whole test command: lint (ruff), the architecture rules (module budget, folder size, layering,
# no import cycles: tools/check_architecture.py), types (mypy), then the test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check kegen lowering mtia_sim tests tools
.venv/bin/python tools/check_architecture.py
.venv/bin/mypy
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
