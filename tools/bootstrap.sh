#!/usr/bin/env bash
# Create a virtual environment and install kegen with the simulator (mtia), Ray and dev extras.
# Idempotent.
#   tools/bootstrap.sh                                   .venv, Python 3.11
#   PYTHON=python3.13 VENV=.venv-py313 tools/bootstrap.sh  another interpreter (a name on PATH, a
#                                                        path, or a version pyenv has, e.g. 3.13)
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
# index has one for this interpreter (cp311 here; on 3.12/3.13 the index's 2.13.0 is the CUDA build,
# which brings Triton 3.7). kegen's own metadata only asks for torch>=2.11 and keeps a torch that
# is already installed.
"${PIP[@]}" "torch==${KEGEN_TORCH_VERSION:-2.13.0}"
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
