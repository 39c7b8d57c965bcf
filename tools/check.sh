#!/usr/bin/env bash
# The whole test command: lint (ruff), types (mypy), then the test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check kegen lowering mtia_sim tests tools
.venv/bin/mypy
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
