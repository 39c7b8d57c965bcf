#!/usr/bin/env bash
# Create a virtual environment and install kegen with the simulator (mtia), Ray and dev extras.
# Idempotent.
#   tools/bootstrap.sh                                   .venv, Python 3.11
#   PYTHON=python3.13 VENV=.venv-py313 tools/bootstrap.sh  another interpreter (a name on PATH, a
#                                                        path, or a version pyenv has, e.g. 3.13)
#   KEGEN_TORCH_VERSION=2.14.1 VENV=.venv-t214 tools/bootstrap.sh  another torch (default 2.13.0)
#   KEGEN_TRITON_VERSION=3.8.0 ...                       another Triton (default: the one torch
#                                                        brings; 3.7.1 beside a CPU build)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
VENV="${VENV:-.venv}"
if ! command -v "$PY" >/dev/null 2>&1; then
  # a version pyenv has installed: PYTHON=3.13 or PYTHON=python3.13
  ver="${PY#python}"
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver"*/bin/python"${ver%%.*}"; do
    [ -x "$cand" ] && PY="$cand"
  done
fi
command -v "$PY" >/dev/null 2>&1 || { echo "bootstrap: no Python interpreter '$PY' (set PYTHON)" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# torch first and pinned, so nothing later pulls another build: the CPU build where the package
# index has one for this interpreter and version (2.13.0 on cp311 here; elsewhere the CUDA build,
# which runs without a GPU). kegen's own metadata asks for a torch range and keeps a torch that is
# already installed.
"${PIP[@]}" "torch==${KEGEN_TORCH_VERSION:-2.13.0}"
# Triton: the one a CUDA build of torch pins (2.11 -> 3.6, 2.13 -> 3.7, 2.14 -> 3.8); a CPU build
# pins none, so it gets 3.7.1 (what torch 2.13 pairs with) unless KEGEN_TRITON_VERSION names another.
if [ -n "${KEGEN_TRITON_VERSION:-}" ]; then
  "${PIP[@]}" "triton==$KEGEN_TRITON_VERSION"
elif ! "$VENV/bin/python" -c "import importlib.metadata as m; m.version('triton')" >/dev/null 2>&1; then
  "${PIP[@]}" "triton==3.7.1"
fi
"${PIP[@]}" -e '.[mtia,ray,dev]'
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
# The lowering's `elf` stage assembles with LLVM's llvm-mc (Debian's `llvm` package).
if ! compgen -c | grep -q "^llvm-mc"; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y -q llvm >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q llvm >/dev/null 2>&1)) \
      || echo "warning: could not install llvm (llvm-mc); the mtia elf stage needs it (apt-get install llvm)" >&2
  else
    echo "warning: llvm-mc is missing; install LLVM (apt-get install llvm) for the mtia elf stage" >&2
  fi
fi
