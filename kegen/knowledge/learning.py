"""Save what a search learned: a verified kernel as a code sample, or a guidance note, with provenance.

Everything saved names where it came from (run, node, speedup) in the file and in its index
line, and nothing is saved unless its check passes: a sample must pass `verify(source)` (the
caller's correctness check, e.g. the evaluator) before it is written.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kegen.knowledge.index import ANY, IndexEntry, parse_tags, validate_tag
from kegen.knowledge.index import insert_entry as _insert_entry
from kegen.knowledge.samples import PROBLEM_SUFFIX
from kegen.knowledge.store import INDEX_NAME, KnowledgeBase

SAMPLE_DIR = "code_samples/learned"
NOTE_DIR = "guidance/learned"
SAMPLE_SECTION = "Learned code samples"
NOTE_SECTION = "Learned guidance"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_USER_INDEX_HEAD = (
    "# kegen knowledge base — user layer\n\nDocuments added by `kegen kb add` and by searches.\n"
)


class LearningRejected(ValueError):
    """A sample or note that was not saved (failed check, bad name, bad provenance or tags)."""


@dataclass(frozen=True)
class Provenance:
    """Where a learned item came from: the search run, the node in its graph, the speedup found."""

    run: str
    node: str
    speedup: float

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Provenance:
        missing = [k for k in ("run", "node", "speedup") if k not in data]
        if missing:
            raise LearningRejected(f"provenance needs run, node and speedup; missing {', '.join(missing)}")
        try:
            speedup = float(str(data["speedup"]).rstrip("x×"))
        except ValueError:
            raise LearningRejected(f"provenance speedup {data['speedup']!r} is not a number") from None
        if not speedup > 0:
            raise LearningRejected(f"provenance speedup must be positive, got {speedup}")
        return cls(run=str(data["run"]), node=str(data["node"]), speedup=speedup)

    @classmethod
    def parse(cls, text: str) -> Provenance:
        """Parse `run=R,node=N,speedup=1.8` (the `kegen kb add --provenance` form)."""
        pairs = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        return cls.from_mapping(pairs)

    def describe(self) -> str:
        return f"run {self.run}, node {self.node}, {self.speedup:.2f}x"


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise LearningRejected(
            f"name {name!r}: use lower-case letters, digits and underscores, starting with a letter"
        )
    return name


def sample_verifier(problem_path: Path, *, mode: str | None = None) -> Callable[[str], bool]:
    """A `verify` for `save_learned_sample`: runs the candidate against the problem's `Model`.

    `mode` is `mtia` (the simulator), `interpret` (Triton's interpreter) or None: the simulator
    when it can run kernels here, else the interpreter. The check runs in a fresh process.
    """
    import tempfile

    from kegen.knowledge.samples import check_samples, probe_mode

    def verify(source: str) -> bool:
        chosen = mode or probe_mode()[0]
        with tempfile.TemporaryDirectory() as tmp:
            candidate = Path(tmp) / "candidate.py"
            candidate.write_text(source, encoding="utf-8")
            shutil.copyfile(problem_path, Path(tmp) / f"candidate{PROBLEM_SUFFIX}")
            return check_samples([candidate], mode=chosen)[0].ok

    return verify


def add_document(kb: KnowledgeBase, entry: IndexEntry, text: str, *, section: str) -> Path:
    """Write `text` at `kb.root / entry.path` and list `entry` in the layer's index.md."""
    target = kb.root / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    index = kb.root / INDEX_NAME
    current = index.read_text(encoding="utf-8") if index.is_file() else _USER_INDEX_HEAD
    index.write_text(_insert_entry(current, entry, section), encoding="utf-8")
    return target


def save_learned_sample(
    kb: KnowledgeBase,
    *,
    name: str,
    source: str,
    problem_path: Path,
    provenance: Mapping[str, object] | Provenance,
    verify: Callable[[str], bool],
    platform: str = ANY,
    op_class: str = ANY,
    summary: str = "",
) -> Path:
    """Save a verified candidate as `code_samples/learned/NAME.py` (+ its problem) and index it.

    `verify(source)` must return True (the candidate is correct on its problem) or nothing is
    written. Returns the path of the saved sample.
    """
    _check_name(name)
    prov = provenance if isinstance(provenance, Provenance) else Provenance.from_mapping(provenance)
    validate_tag("platform", platform)
    validate_tag("op", op_class)
    problem_path = Path(problem_path)
    if not problem_path.is_file():
        raise LearningRejected(f"problem file {problem_path} does not exist")
    if "ModelNew" not in source:
        raise LearningRejected("a learned sample is a candidate: its source must define ModelNew")
    if not verify(source):
        raise LearningRejected(f"sample {name!r} failed its correctness check; not saved")
    rel = f"{SAMPLE_DIR}/{name}.py"
    header = (
        f"# Learned by a kegen search ({prov.describe()}) on problem {problem_path.name};\n"
        f"# the problem (Model, get_inputs, get_init_inputs) is in {name}{PROBLEM_SUFFIX}.\n"
    )
    entry = IndexEntry(
        path=rel,
        title=f"Learned: {name}",
        summary=(summary or f"verified candidate for {problem_path.stem}") + f" ({prov.describe()}).",
        platforms=(platform,),
        op_classes=(op_class,),
        bottlenecks=(ANY,),
        phases=("draft", "optimize"),
    )
    target = add_document(kb, entry, header + source, section=SAMPLE_SECTION)
    shutil.copyfile(problem_path, target.with_name(name + PROBLEM_SUFFIX))
    return target


def save_learned_note(
    kb: KnowledgeBase,
    *,
    name: str,
    title: str,
    text: str,
    tags: str,
    provenance: Mapping[str, object] | Provenance,
    summary: str,
    verify: Callable[[], bool] | None = None,
) -> Path:
    """Save a guidance note as `guidance/learned/NAME.md` with its provenance, and index it.

    `tags` is an index tag string (`platform=mtia op=matmul bottleneck=memory phase=optimize`).
    `verify()`, when given, re-checks the improvement the note describes; False rejects the note.
    """
    _check_name(name)
    prov = provenance if isinstance(provenance, Provenance) else Provenance.from_mapping(provenance)
    parsed = parse_tags(tags)
    if verify is not None and not verify():
        raise LearningRejected(f"note {name!r}: the improvement it describes failed its check; not saved")
    body = text if text.lstrip().startswith("#") else f"# {title}\n\n{text}"
    body = body.rstrip() + f"\n\n_Provenance: learned by a kegen search ({prov.describe()})._\n"
    entry = IndexEntry(
        path=f"{NOTE_DIR}/{name}.md",
        title=title,
        summary=f"{summary} ({prov.describe()}).",
        platforms=parsed["platform"],
        op_classes=parsed["op"],
        bottlenecks=parsed["bottleneck"],
        phases=parsed["phase"],
    )
    return add_document(kb, entry, body, section=NOTE_SECTION)
