"""The tune report: a text table per machine, an HTML page in the run directory, the --json object."""

from __future__ import annotations

import html
from typing import Any


def _t(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e6:.2f} us"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}x"


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.0%}"


def _checked_by(variants: list[dict[str, Any]]) -> str:
    """How the variants were verified: kegen's kernels at fresh inputs, or torch.compile's own module."""
    own = sum(v.get("checked_by") == "torch.compile itself" for v in variants)
    fresh = "fresh random inputs, fp32 atol 1e-4 rtol 5e-4"
    if not own:
        return f"({fresh})"
    if own == len(variants):
        return "(each runs torch.compile's own module: nothing of kegen's installed, nothing to check)"
    return f"({len(variants) - own} at {fresh}; {own} run torch.compile's own module)"


def text_report(summary: dict[str, Any]) -> str:
    """Per machine: model times eager / compile / tuned, Amdahl bound, variants, the kernel table."""
    out = [f"kegen tune {summary['model']}  (run {summary['run_dir']}, {summary['evaluations']} evaluations)"]
    for name, m in summary["machines"].items():
        out += [
            "",
            f"== {name} ==",
            f"model time: eager {_t(m['eager_s'])}  torch.compile {_t(m['compile_s'])}  "
            f"tuned {_t(m['tuned_s'])}",
            f"speedup: {_x(m['speedup_vs_compile'])} vs torch.compile, {_x(m['speedup_vs_eager'])} vs eager; "
            f"Amdahl bound {_x(m['amdahl_bound'])} (hot kernels cover {m['hot_share']:.0%})",
            f"variants verified: {sum(v['verified'] for v in m['variants'])}/{m['variants_checked']} "
            + _checked_by(m["variants"]),
            f"search unit: {m.get('mode', 'whole-variant')}; ops on the host: "
            + (
                ", ".join(m["host_ops"]) if m.get("host_ops") else "none (every op runs on the device, timed)"
            ),
        ]
        out += [f"  {v['uninstalled']}" for v in m["variants"] if v["uninstalled"]]
        out.append(
            f"  {'kernel':58} {'share':>6} {'seed':>11} {'best':>11} {'speedup':>8} {'roofline':>8}  "
            "installed  change"
        )
        for k in m["kernels"]:
            out.append(
                f"  {k['name'][:58]:58} {k['share']:6.1%} {_t(k['seed_time_s']):>11} "
                f"{_t(k['best_time_s']):>11} {k['speedup']:7.3f}x {_pct(k.get('roofline')):>8}  "
                f"{'yes' if k['installed'] else 'no':9}  "
                f"{k.get('change', '')[:40]}"
            )
    return "\n".join(out)


def html_report(summary: dict[str, Any]) -> str:
    """A self-contained HTML page of the report."""
    e = html.escape
    parts = [
        f"<html><head><meta charset='utf-8'><title>kegen tune {e(summary['model'])}</title>",
        "<style>td,th{padding:2px 8px;text-align:right}td:first-child{text-align:left}</style></head><body>",
        f"<h1>kegen tune {e(summary['model'])}</h1><p>{summary['evaluations']} evaluations; "
        f"verified: {summary['verified']}</p>",
    ]
    for name, m in summary["machines"].items():
        parts.append(
            f"<h2>{e(name)}</h2><p>eager {_t(m['eager_s'])} · torch.compile {_t(m['compile_s'])} · "
            f"tuned {_t(m['tuned_s'])} · {_x(m['speedup_vs_compile'])} vs compile · "
            f"{_x(m['speedup_vs_eager'])} vs eager · Amdahl bound {_x(m['amdahl_bound'])} · "
            f"search unit: {e(m.get('mode', 'whole-variant'))}</p>"
        )
        parts.append(
            "<table><tr><th>variant</th><th>shapes</th><th>compile</th><th>tuned</th><th>verified</th>"
            "<th>installed</th></tr>"
        )
        for v in m["variants"]:
            parts.append(
                f"<tr><td>{v['variant']}</td><td>{e(str(v['shapes']))}</td><td>{_t(v['compile_s'])}</td>"
                f"<td>{_t(v['tuned_s'])}</td><td>{v['verified']}</td><td>{v['installed']}</td></tr>"
            )
        parts.append(
            "</table><table><tr><th>kernel</th><th>share</th><th>seed</th><th>best</th><th>speedup</th>"
            "<th>roofline</th><th>installed</th><th>change</th></tr>"
        )
        for k in m["kernels"]:
            parts.append(
                f"<tr><td>{e(k['name'])}</td><td>{k['share']:.1%}</td><td>{_t(k['seed_time_s'])}</td>"
                f"<td>{_t(k['best_time_s'])}</td><td>{k['speedup']:.3f}x</td><td>{_pct(k.get('roofline'))}</td>"
                f"<td>{k['installed']}</td>"
                f"<td>{e(k.get('change', ''))}</td></tr>"
            )
        parts.append("</table>")
    return "\n".join(parts) + "</body></html>\n"
