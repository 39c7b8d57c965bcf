"""`kegen kb`: browse and extend the hardware knowledge base (list, show, search, add)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from kegen.knowledge.index import ANY, TAG_KEYS, IndexEntry, IndexFormatError, parse_tags
from kegen.knowledge.learning import LearningRejected, Provenance, add_document
from kegen.knowledge.samples import PROBLEM_SUFFIX, check_samples, probe_mode
from kegen.knowledge.store import DocumentNotFound, KnowledgeBase

EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="knowledge base folder to use (default: the shipped base with $KEGEN_HOME/knowledge "
        "on top; `kb add` writes to $KEGEN_HOME/knowledge)",
    )
    sub = parser.add_subparsers(dest="kb_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="table of documents with their tags")
    for key, values in TAG_KEYS.items():
        p.add_argument(f"--{key}", choices=values, default=None, help=f"only documents for this {key}")

    p = sub.add_parser("show", help="print one document")
    p.add_argument("path", help="document path as `kb list` shows it, e.g. hardware/mtia/programming.md")

    p = sub.add_parser("search", help="rank documents by how well they match words")
    p.add_argument("query", nargs="+", help="words to look for")
    p.add_argument("--limit", type=int, default=10, help="show at most this many results (default 10)")

    p = sub.add_parser("add", help="validate a code sample or note, copy it in and list it in index.md")
    p.add_argument("file", type=Path, help="a .py code sample (KernelBench form) or a .md note")
    p.add_argument("--kind", choices=("sample", "note"), required=True)
    p.add_argument(
        "--tags",
        required=True,
        help='index tags, e.g. "platform=mtia op=matmul bottleneck=memory phase=optimize"',
    )
    p.add_argument("--title", default=None, help="title in the index (default: from the file)")
    p.add_argument("--summary", default=None, help="one-line summary for the index (default: from the file)")
    p.add_argument("--name", default=None, help="file name to store it under (default: the file's name)")
    p.add_argument(
        "--problem",
        type=Path,
        default=None,
        help="problem file (Model, get_inputs, get_init_inputs) when the sample only has ModelNew",
    )
    p.add_argument("--provenance", default=None, help="where it came from: run=R,node=N,speedup=S")
    p.add_argument(
        "--mode",
        choices=("auto", "mtia", "interpret"),
        default="auto",
        help="how to verify a sample: on the simulator, in Triton's interpreter, or auto (default: "
        "the simulator when it works)",
    )


def _open(root: Path | None) -> KnowledgeBase:
    return KnowledgeBase(root) if root is not None else KnowledgeBase.default()


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*["-" * w for w in widths]), *[fmt.format(*r) for r in rows]]
    return "\n".join(line.rstrip() for line in lines)


def _matches(entry: IndexEntry, args: argparse.Namespace) -> bool:
    fields = {
        "platform": entry.platforms,
        "op": entry.op_classes,
        "bottleneck": entry.bottlenecks,
        "phase": entry.phases,
    }
    for key, values in fields.items():
        wanted = getattr(args, key, None)
        if wanted not in (None, ANY) and wanted not in values and ANY not in values:
            return False
    return True


def _list(kb: KnowledgeBase, args: argparse.Namespace) -> int:
    rows = [
        [
            e.path,
            e.kind,
            ",".join(e.platforms),
            ",".join(e.op_classes),
            ",".join(e.bottlenecks),
            ",".join(e.phases),
        ]
        for e in kb.entries
        if _matches(e, args)
    ]
    print(_table(rows, ["path", "kind", "platform", "op", "bottleneck", "phase"]))
    print(f"\n{len(rows)} document(s)")
    return 0


def _show(kb: KnowledgeBase, args: argparse.Namespace) -> int:
    doc = kb.read(args.path)
    sys.stdout.write(doc.text if doc.text.endswith("\n") else doc.text + "\n")
    return 0


def _search(kb: KnowledgeBase, args: argparse.Namespace) -> int:
    results = kb.search(" ".join(args.query))[: args.limit]
    if not results:
        print(f"no document matches {' '.join(args.query)!r}")
        return 1
    print(_table([[f"{score:.1f}", e.path, e.title] for e, score in results], ["score", "path", "title"]))
    return 0


def _describe_file(path: Path, kind: str) -> tuple[str, str]:
    """A default title and summary: the note's `# ` heading / the sample's docstring first line."""
    text = path.read_text(encoding="utf-8")
    if kind == "note":
        heading = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), "")
        body = next(
            (line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")), ""
        )
        return heading, body
    import ast

    doc = ast.get_docstring(ast.parse(text)) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    title, _, rest = first.partition(":")
    return title.strip(), (rest.strip() or first)


def _add(kb: KnowledgeBase, args: argparse.Namespace) -> int:
    src: Path = args.file
    if not src.is_file():
        raise LearningRejected(f"{src} does not exist")
    suffix = ".py" if args.kind == "sample" else ".md"
    if src.suffix != suffix:
        raise LearningRejected(f"a {args.kind} must be a {suffix} file, got {src.name}")
    tags = parse_tags(args.tags)
    title, summary = _describe_file(src, args.kind)
    title = args.title or title
    summary = args.summary or summary
    if not title or not summary:
        raise LearningRejected(
            "give --title and --summary (the file has no heading/docstring to take them from)"
        )
    prov = Provenance.parse(args.provenance) if args.provenance else None
    name = args.name or src.stem
    folder = "code_samples" if args.kind == "sample" else "guidance"
    rel = f"{folder}/{name}{suffix}"
    text = src.read_text(encoding="utf-8")
    if args.kind == "sample":
        _verify_sample(src, args)
        if prov is not None:
            text = f"# Provenance: kegen search ({prov.describe()}).\n" + text
    elif prov is not None:
        text = text.rstrip() + f"\n\n_Provenance: kegen search ({prov.describe()})._\n"
    if prov is not None:
        summary = summary.rstrip(".") + f" ({prov.describe()})."
    entry = IndexEntry(
        path=rel,
        title=title,
        summary=summary,
        platforms=tags["platform"],
        op_classes=tags["op"],
        bottlenecks=tags["bottleneck"],
        phases=tags["phase"],
    )
    target = add_document(kb, entry, text, section="Code samples" if args.kind == "sample" else "Guidance")
    if args.kind == "sample" and args.problem is not None:
        shutil.copyfile(args.problem, target.with_name(name + PROBLEM_SUFFIX))
    print(f"added {rel} to {kb.root} (index: {kb.index_path})")
    return 0


def _verify_sample(src: Path, args: argparse.Namespace) -> None:
    """Run the sample against its reference; raise LearningRejected if it fails."""
    import tempfile

    mode, why = probe_mode() if args.mode == "auto" else (args.mode, "chosen with --mode")
    with tempfile.TemporaryDirectory() as tmp:
        candidate = Path(tmp) / src.name
        shutil.copyfile(src, candidate)
        if args.problem is not None:
            shutil.copyfile(args.problem, candidate.with_name(candidate.stem + PROBLEM_SUFFIX))
        result = check_samples([candidate], mode=mode)[0]
    if not result.ok:
        raise LearningRejected(f"{src} failed its check in {mode} mode: {result.detail}")
    print(f"verified {src.name} in {mode} mode ({why}): {result.detail}")


def run(args: argparse.Namespace) -> int:
    kb = _open(args.root)
    actions = {"list": _list, "show": _show, "search": _search, "add": _add}
    try:
        return actions[args.kb_command](kb, args)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (DocumentNotFound, IndexFormatError, LearningRejected) as exc:
        print(f"kegen kb {args.kb_command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
