"""Installing winners: per input variant the searched candidate replaces Inductor's kernels only
where it is faster and verified; the tuned model dispatches on input shapes (a guard) to the
shape-specialised candidate and falls back to torch.compile's generic kernels for any other shape."""

from __future__ import annotations

import json
from typing import Any

from kegen.tune.capture import ModelFile, shapes_of


def choose(seed_time: float | None, best_time: float | None, best_source: str | None) -> bool:
    """Install the winner only when it exists and is strictly faster than Inductor's draft."""
    return bool(best_source) and seed_time is not None and best_time is not None and best_time < seed_time


def kernel_rows(
    seed_profiles: list[dict[str, Any]],
    tuned_profiles: list[dict[str, Any]],
    shares: dict[str, float],
    installed: list[bool],
    changes: list[str],
) -> list[dict[str, Any]]:
    """The per-kernel table summed over variants: seed (Inductor) and best (installed) time per
    kernel name; `installed` when some variant runs a faster kernel of that name from a winner."""
    seed: dict[str, float] = {}
    best: dict[str, float] = {}
    won: dict[str, bool] = {}
    change: dict[str, str] = {}
    for sp, tp, inst, ch in zip(seed_profiles, tuned_profiles, installed, changes, strict=True):
        s = {k["name"]: float(k["total_s"]) for k in sp.get("kernels", [])}
        t = {k["name"]: float(k["total_s"]) for k in tp.get("kernels", [])}
        for name in s.keys() | t.keys():
            seed[name] = seed.get(name, 0.0) + s.get(name, 0.0)
            best[name] = best.get(name, 0.0) + t.get(name, s.get(name, 0.0))
            faster = inst and t.get(name, s.get(name, 0.0)) < s.get(name, 0.0) - 1e-15
            won[name] = won.get(name, False) or faster
            if faster and ch:
                change[name] = ch
    rows = []
    for name in sorted(seed, key=lambda n: -seed[n]):
        rows.append(
            {
                "name": name,
                "share": shares.get(name, 0.0),
                "seed_time_s": seed[name],
                "best_time_s": best[name],
                "speedup": seed[name] / best[name] if best[name] > 0 else 1.0,
                "installed": won[name],
                "change": change.get(name, ""),
            }
        )
    return rows


def load_candidate(source: str, seed: int = 0) -> Any:
    """ModelNew of a candidate source, built under `seed` (its weights equal Model's under that seed).
    The source is written to a file of its own first (<kegen cache>/tuned/<hash>.py): Triton reads
    a kernel's source from the file that defines it."""
    import hashlib

    import torch

    from kegen.eval.loader import load_candidate as load_class
    from kegen.settings import PathSettings

    folder = PathSettings.from_env().cache_dir / "tuned"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"candidate_{hashlib.sha256(source.encode()).hexdigest()[:16]}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    cls = load_class(path)
    torch.manual_seed(seed)
    return cls().eval()


class TunedModel:
    """The tuned model: inputs whose shapes match a tuned variant run its installed candidate
    (Inductor's kernels or a verified winner); any other shape runs `kegen.inductor.compile`."""

    def __init__(self, mf: ModelFile, installed: dict[str, str], machine: str) -> None:
        self.mf = mf
        self.machine = machine
        self.sources = installed  # shape key -> candidate source
        self._built: dict[str, Any] = {}
        self._generic: Any = None

    @staticmethod
    def shape_key(inputs: list[Any]) -> str:
        return json.dumps(shapes_of(list(inputs)))

    def __call__(self, *inputs: Any) -> Any:
        key = self.shape_key(list(inputs))
        if key in self.sources:
            if key not in self._built:
                self._built[key] = load_candidate(self.sources[key])
            return self._built[key](*inputs)
        if self._generic is None:  # the guard's fallback: shape-generic Inductor kernels
            import kegen.inductor

            self._generic = kegen.inductor.compile(self.mf.build(), machine=self.machine, dynamic=True)
        return self._generic(*inputs)
