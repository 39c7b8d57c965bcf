"""Triton's compile cache for sandboxed workers, kept per candidate source.

A worker compiles into a private, per-job cache directory in the sandbox's /tmp, so no candidate
can plant compiled binaries for another. After an evaluation the evaluator may keep that cache
under a key made of the candidate's exact source, the target and the machine
(`~/.cache/kegen/eval-triton/<key>`), and hand a read-only copy to later workers evaluating *the
same source*: whatever a candidate put there can only ever be used by itself. Files come back as
plain bytes with checked relative paths and bounded sizes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

MAX_FILES = 512
MAX_BYTES = 64 * 1024 * 1024
SEED_DIR = "triton-cache"


def cache_root() -> Path:
    """`$KEGEN_EVAL_CACHE_DIR/eval-triton`, else under kegen's cache directory (`KEGEN_CACHE_DIR`,
    default `~/.kegen/cache`)."""
    base = os.environ.get("KEGEN_EVAL_CACHE_DIR")
    if not base:
        from kegen.settings import PathSettings

        base = str(PathSettings.from_env().cache_dir)
    return Path(base) / "eval-triton"


def cache_key(source: Path, target: str, machine: str) -> str:
    h = hashlib.sha256(source.read_bytes())
    h.update(f"\0{target}\0{machine}".encode())
    return h.hexdigest()[:32]


def seed_job(key: str, job_dir: Path) -> bool:
    """Copy the kept cache for `key` (if any) into the worker's inbox job directory."""
    src = cache_root() / key
    if not src.is_dir():
        return False
    try:
        shutil.copytree(src, job_dir / SEED_DIR)
        for root, dirs, files in os.walk(job_dir / SEED_DIR):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        return True
    except OSError:
        return False


def safe_relpath(rel: object) -> str | None:
    """`rel` if it is a plain relative path inside the cache, else None."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        return None
    p = PurePosixPath(rel)
    if p.is_absolute() or any(part in ("..", "") for part in p.parts):
        return None
    return str(p)


def keep(key: str, files: list[tuple[str, bytes]]) -> None:
    """Add a worker's cache files under `key` (files already kept are not replaced); later
    evaluations of the same source reuse them."""
    dest = cache_root() / key
    if not files or len(files) > MAX_FILES or sum(len(b) for _, b in files) > MAX_BYTES:
        return
    checked = [(safe_relpath(rel), data) for rel, data in files]
    if any(rel is None for rel, _ in checked):
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=dest.parent))
    try:
        for rel, data in checked:
            assert rel is not None
            if (dest / rel).exists():
                continue
            staged = tmp / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(data)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, dest / rel)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
