#!/usr/bin/env bash
# Create .venv (Python 3.11) and install kegen with its pinned dependencies. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch is pinned to the CPU build first, so nothing later can pull a CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
# Candidates are evaluated in a bubblewrap sandbox (docs/THREAT_MODEL.md); optional: kegen warns
# in each result and runs unsandboxed where bwrap is missing.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y -q bubblewrap >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1)) \
      || echo "warning: could not install bubblewrap; candidate kernels will run without OS isolation" >&2
  else
    echo "warning: bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap) to sandbox candidate kernels" >&2
  fi
fi
