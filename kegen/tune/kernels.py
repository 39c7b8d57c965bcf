"""Per-kernel tuning: every hot Inductor kernel of every variant searched as a standalone problem.

Per variant: the partition (`partition.py`) gives one problem per kernel group, Inductor drafts each
(the group's seed), and the composed wrapper (`compose.py`) runs the groups in order. Per machine:
the composed seed's profile gives each group's time (its kernels carry the `gK_` prefix), triage
picks the hot groups, one `--budget` is split over (variant, group) problems by the time each
group spends above its launch floor, the existing search runs on each, and a group's winner goes
in only where it beat Inductor's draft of the group. The tuned wrapper is then verified against
eager at fresh inputs and installed only where it is faster than Inductor's whole-model draft:
the tuned model is never slower than torch.compile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kegen.tune.capture import ModelFile, TuneError, draft
from kegen.tune.carry import allocate_searches, carry_winners
from kegen.tune.compose import compose, layout
from kegen.tune.fusion import fuse_groups
from kegen.tune.install import kernel_rows
from kegen.tune.library import KernelLibrary
from kegen.tune.partition import (
    PartitionError,
    cut,
    graph_args,
    merge_duplicate_outputs,
    model_tensor_inputs,
    problem_source,
    record_values,
)
from kegen.tune.problems import Counter, measure, search
from kegen.tune.regions import CHANGES, KINDS, carve_regions, region_seed
from kegen.tune.triage import triage
from kegen.tune.verify import fresh_seed, verify_variant


def plan_variant(mf: ModelFile, problem: Path, k: int, out_dir: Path) -> dict[str, Any]:
    """Variant k cut into kernel groups: {"whole" (Inductor's draft of the model), "layout",
    "groups" [{"name", "kernel", "problem", "seed_path"}], "composed" (the wrapper of the seeds)}.
    Raises PartitionError or TuneError when the model cannot be cut."""
    from kegen.inductor.capture import CaptureError, capture
    from kegen.inductor.draft import write_candidate

    try:
        cap = capture(problem, keep_graph=True)
        whole, _ = write_candidate(cap, problem)
    except CaptureError as exc:
        raise TuneError(f"Inductor cannot draft {problem.name}: {exc}", "capture") from exc
    if cap.post_grad is None or not cap.kernel_nodes:
        raise PartitionError("Inductor kept no post-grad graph or kernel provenance")
    values = record_values(cap.post_grad, graph_args(cap, mf.build(0), mf.variants[k]))
    part = carve_regions(cut(cap.post_grad, cap.kernel_nodes, values))
    merge_duplicate_outputs(part)  # one input where two projections read one activation
    part, fused = fuse_groups(part, draft, mf.path.name, k, model_tensor_inputs(cap))
    lay = layout(part, cap)
    d = out_dir / f"variant{k}"
    d.mkdir(parents=True, exist_ok=True)
    groups, seeds, inductor = [], [], []
    for g in part.groups:
        p = d / f"{g.name}.py"
        p.write_text(problem_source(part, g, mf.path.name, k))
        entry: dict[str, Any] = {"name": g.name, "kernel": g.kernel, "problem": str(p)}
        ip = d / f"{g.name}_inductor.py"
        region = region_seed(part, g) if g.kernel in KINDS else None
        if g.index in fused:  # the merged group's baseline is Inductor's kernels, its seed the fused one
            f = fused[g.index]
            ip.write_text(f.inductor.replace(f.problem_name, p.name))
            sp = d / f"{g.name}_fused.py"
            sp.write_text(f.fused.replace(f.problem_name, p.name))
            change = f.change or FUSED_CHANGE.format(members=" + ".join(f.members))
            entry |= {"inductor_path": str(ip), "members": f.members, "change": change}
        elif region is not None:  # a region's baseline is Inductor's draft of it, its seed kegen's template
            ip.write_text(draft(p))
            sp = d / f"{g.name}_template.py"
            sp.write_text(region)
            entry |= {"inductor_path": str(ip), "members": [g.kernel], "change": CHANGES[g.kernel]}
        else:
            ip.write_text(draft(p))
            sp = ip
            batched = batch_seed(ip.read_text())
            if batched is not None:  # copies of one kernel (a cat's inputs): one launch
                sp = d / f"{g.name}_batched.py"
                sp.write_text(batched)
                entry |= {"inductor_path": str(ip), "members": [g.kernel], "change": BATCH_CHANGE}
        seeds.append(sp.read_text())
        inductor.append(ip.read_text())
        groups.append({**entry, "seed_path": str(sp)})
    plan = {"whole": whole, "layout": lay, "groups": groups, "composed": compose(lay, seeds, mf.path.name, k)}
    if fused:
        plan["composed_inductor"] = compose(lay, inductor, mf.path.name, k)
    return plan


def group_profile(profile: dict[str, Any], groups: list[dict[str, Any]]) -> dict[str, Any]:
    """A composed candidate's profile summed per group (kernel names carry the `gK_` prefix)."""
    times = {g["name"]: 0.0 for g in groups}
    calls = dict.fromkeys(times, 0)
    floors = dict.fromkeys(times, 0.0)
    by_prefix = {f"g{i}_": g["name"] for i, g in enumerate(groups)}

    def group_of(kernel: str) -> str | None:
        head = kernel.split("_", 1)[0] + "_"
        return by_prefix.get(head)

    for kern in profile.get("kernels", []):
        if (name := group_of(kern["name"])) is not None:
            times[name] += float(kern["total_s"])
            calls[name] += int(kern.get("calls", 1))
    for launch in profile.get("launches", []):
        if (name := group_of(launch["kernel"])) is not None:
            floors[name] += float(launch.get("launch_overhead_s", 0.0))
    return {
        "time_s": profile.get("time_s"),
        "kernels": [{"name": n, "total_s": t, "calls": calls[n]} for n, t in times.items()],
        "launches": [{"kernel": n, "launch_overhead_s": f} for n, f in floors.items()],
    }


def tune_kernels(
    mf: ModelFile,
    problems: list[Path],
    plans: list[dict[str, Any]],
    seeds: list[dict[str, Any]],
    shapes: list[Any],
    machine: str,
    opts: Any,
    lib: KernelLibrary,
    counter: Counter,
    state: Any,
    run_dir: Path,
) -> dict[str, Any]:
    """One machine's per-kernel tuning; `seeds` are the whole-model drafts' measurements (the
    torch.compile times). Returns the machine's report entries (see run._tune_machine)."""
    t = opts.target
    composed: list[dict[str, Any]] = []
    gprof: list[dict[str, Any] | None] = []
    for k, (p, plan) in enumerate(zip(problems, plans, strict=True)):
        key = f"{machine}/composed/{k}"
        m = state.get(key)
        if m is None and opts.budget == 0:  # nothing to search: the groups' times are not needed
            m = {"ok": False, "message": "not measured (budget 0)", "profile": {}}
        elif m is None:
            m = state.put(
                key,
                measure(
                    p, plan["composed"], t, machine, lib, counter, "composed", shapes[k], retune=opts.retune
                ).to_dict(),
            )
        composed.append(m)
        gprof.append(group_profile(m["profile"], plan["groups"]) if m["ok"] else None)
    plans = list(plans)
    inductor_prof: list[dict[str, Any] | None] = list(gprof)
    for k, (p, plan) in enumerate(zip(problems, plans, strict=True)):
        if "composed_inductor" not in plan or composed[k].get("message", "").startswith("not measured"):
            continue
        key = f"{machine}/composed_inductor/{k}"
        mi = state.get(key) or state.put(
            key,
            measure(
                p, plan["composed_inductor"], t, machine, lib, counter, "composed", shapes[k],
                retune=opts.retune,
            ).to_dict(),
        )  # fmt: skip
        ip = group_profile(mi["profile"], plan["groups"]) if mi["ok"] else None
        plans[k] = settle_fusion(plan, gprof[k], ip, mf.path.name, k)
        inductor_prof[k] = ip
        if not composed[k]["ok"] and mi["ok"]:  # a fused seed is wrong here: Inductor's kernels
            composed[k], gprof[k] = mi, ip
    tri = [triage(gp, opts.coverage) if gp else None for gp in gprof]
    gains: dict[str, float] = {}
    for k, tr in enumerate(tri):
        if tr is None:
            continue
        for ks in tr.kernels:
            if ks.name in tr.hot:
                gi = next(i for i, g in enumerate(plans[k]["groups"]) if g["name"] == ks.name)
                gains[f"{k}/{gi}"] = max(0.0, ks.seconds - ks.launch_overhead_s)
    alloc = allocate_searches(opts.budget, gains, plans)
    found: dict[str, dict[str, Any]] = {}

    def run_searches(share: dict[str, int]) -> None:
        for pk, n in share.items():
            if n <= 0:
                continue
            k, gi = (int(x) for x in pk.split("/"))
            g = plans[k]["groups"][gi]
            key = f"{machine}/ksearch/{pk}"
            found[pk] = state.get(key) or state.put(
                key,
                search(
                    Path(g["problem"]),
                    Path(g["seed_path"]),
                    n,
                    t,
                    machine,
                    run_dir / "search" / f"{machine}-v{k}-{g['name']}",
                    lib,
                    counter,
                    [shapes[k], g["name"]],
                    opts.executor,
                    opts.retune,
                ),
            )

    run_searches(alloc)
    found.update(carry_winners(found, plans))
    # what is left: one evaluation each for hot groups no search reached and no change carried to
    left = opts.budget - sum(alloc.values())
    rest = sorted((pk for pk in gains if pk not in found and gains[pk] > 0), key=lambda pk: -gains[pk])
    more = dict.fromkeys(rest[: max(0, left)], 1)
    if more:
        alloc.update(more)
        run_searches(more)
        found.update(carry_winners(found, plans))
    variants, installed_sources, notes = [], [], []
    tuned_profiles: list[dict[str, Any] | None] = []
    winners_in: dict[str, bool] = {}
    changes: dict[str, str] = {}
    roofline: dict[str, float] = {}
    for k, (p, plan) in enumerate(zip(problems, plans, strict=True)):
        key = f"{machine}/kverify/{k}"
        v = state.get(key)
        if v is None:
            v = _install_variant(
                k, p, plan, found, composed[k], seeds[k], shapes[k], t, machine, opts, lib, counter
            )
            state.put(key, v)
        variants.append(v)
        installed_sources.append(v["source"])
        tuned_profiles.append(group_profile(v["profile"], plan["groups"]) if v["composed"] else None)
        if v["uninstalled"]:
            notes.append(v["uninstalled"])
        for gi, g in enumerate(plan["groups"]):
            f = found.get(f"{k}/{gi}")
            if f and f.get("source") and f.get("change"):
                changes.setdefault(g["name"], f["change"])
            if f and not f.get("carried"):  # the searched variant's group problem: winner's or seed's
                frac = f.get("roofline") if gi in v["winners"] else f.get("seed_roofline")
                if frac is not None:
                    roofline.setdefault(g["name"], float(frac))
            winners_in[g["name"]] = winners_in.get(g["name"], False) or gi in v["winners"]
            if g.get("fused") and v["composed"] and gi not in v["winners"]:
                winners_in[g["name"]] = True
                changes.setdefault(g["name"], g.get("change", ""))
    if tri[0] is not None:
        first = tri[0]
        rows = _rows(inductor_prof, tuned_profiles, first, winners_in, changes, roofline)
    else:  # the groups were not measured: the table of Inductor's whole-model kernels
        first = triage(seeds[0]["profile"], opts.coverage)
        shares = {ks.name: ks.share for ks in first.kernels}
        n = len(seeds)
        rows = kernel_rows(
            [s["profile"] for s in seeds], [v["profile"] for v in variants], shares, [False] * n, [""] * n
        )
    return {
        "variants": variants,
        "sources": installed_sources,
        "rows": rows,
        "triage": first,
        "budget": alloc,
    }


def _install_variant(
    k: int,
    problem: Path,
    plan: dict[str, Any],
    found: dict[str, dict[str, Any]],
    composed: dict[str, Any],
    seed: dict[str, Any],
    shapes: Any,
    target: str,
    machine: str,
    opts: Any,
    lib: KernelLibrary,
    counter: Counter,
) -> dict[str, Any]:
    """Variant k's installed candidate: the composed wrapper with every group's winner that beat
    Inductor's draft of the group, verified at fresh inputs, if it is faster than Inductor's whole
    draft; else the whole draft. A winner set that breaks the variant is uninstalled."""
    groups = plan["groups"]
    sources = [Path(g["seed_path"]).read_text() for g in groups]
    winners = []
    for gi in range(len(groups)):
        f = found.get(f"{k}/{gi}")
        if f and f.get("source") and float(f.get("speedup", 1.0)) > 1.0:
            sources[gi] = f["source"]
            winners.append(gi)
    seed_verify = fresh_seed()
    uninstalled = ""
    tuned = None

    def run(chosen: list[int]) -> Any:
        srcs = [sources[i] if i in chosen else Path(g["seed_path"]).read_text() for i, g in enumerate(groups)]
        src = compose(plan["layout"], srcs, problem.name, k, [i in chosen for i in range(len(groups))])
        return src, measure(
            problem, src, target, machine, lib, counter, "verify", shapes, seed_verify, opts.retune
        )

    if composed["ok"] and (winners or any(g.get("fused") for g in groups)):
        src, m = run(winners)
        carried = [i for i in winners if found[f"{k}/{i}"].get("carried")]
        if not m.ok and carried:  # a carried change broke the variant: the searched winners alone
            uninstalled = _names(groups, carried, k, "carried changes of", m.message)
            winners = [i for i in winners if i not in carried]
            carried = []
            if winners:
                src, m = run(winners)
        if m.ok and carried:  # a carried change slower here than Inductor's kernel goes out
            before = _group_times(composed["profile"], groups)
            after = _group_times(m.profile, groups)
            slower = [
                i for i in carried if after.get(groups[i]["name"], 0.0) >= before.get(groups[i]["name"], 0.0)
            ]
            if slower:
                winners = [i for i in winners if i not in slower]
                if winners:
                    src, m = run(winners)
        if winners and not m.ok:
            uninstalled = _names(groups, winners, k, "winners of", m.message)
            winners = []
            src = plan["composed"]
            m = measure(
                problem, src, target, machine, lib, counter, "verify", shapes, seed_verify, opts.retune
            )
        if m.ok and m.time_s is not None:
            tuned = (src, m)
    if tuned is not None and tuned[1].time_s < seed["time_s"]:
        src, m = tuned
        return {
            "ok": True,
            "time_s": m.time_s,
            "profile": m.profile,
            "source": src,
            "composed": True,
            "winners": winners,
            "uninstalled": uninstalled,
            "seed": seed_verify,
        }
    verdict, src = verify_variant(
        k, problem, None, plan["whole"], target, machine, lib, counter, shapes, seed_verify, opts.retune
    )
    return {
        "ok": verdict.ok,
        "time_s": verdict.time_s,
        "profile": verdict.profile,
        "source": src,
        "composed": False,
        "winners": [],
        "uninstalled": uninstalled,
        "seed": seed_verify,
    }


BATCH_CHANGE = "one launch for the copies Inductor launches per buffer (a cat's inputs), by grid axis 1"


def batch_seed(source: str) -> str | None:
    """The draft with its repeated launches of one pointwise kernel batched (`launch_batch`), or None."""
    from kegen.search.operators.mutations.base import MutationError
    from kegen.search.operators.mutations.launch_batch import batch_launches

    out = None
    try:
        while True:  # every run of batchable launches
            out = batch_launches(out or source)
    except (MutationError, SyntaxError):
        return out


FUSED_CHANGE = "fused {members} into one kernel (the pointwise work in the GEMM's epilogue)"


def settle_fusion(
    plan: dict[str, Any],
    fused_prof: dict[str, Any] | None,
    inductor_prof: dict[str, Any] | None,
    model: str,
    variant: int,
) -> dict[str, Any]:
    """The plan with each merged group seeded by its fused kernel only where the composed seed ran it
    faster than Inductor's two kernels (and was correct); elsewhere by Inductor's draft of the group.
    A merged group that keeps its fused seed is marked `fused`."""
    fast = _times(fused_prof)
    slow = _times(inductor_prof)
    groups, sources = [], []
    for g in plan["groups"]:
        g = dict(g)
        if "inductor_path" in g:
            keep = fused_prof is not None and g["name"] in fast and fast[g["name"]] < slow.get(g["name"], 0.0)
            g["fused"] = keep
            if not keep:
                g["seed_path"] = g["inductor_path"]
        groups.append(g)
        sources.append(Path(g["seed_path"]).read_text())
    lay = plan["layout"]
    out = {**plan, "groups": groups}
    if any("inductor_path" in g and not g["fused"] for g in groups):
        out["composed"] = compose(lay, sources, model, variant)
    return out


def _times(gp: dict[str, Any] | None) -> dict[str, float]:
    return {r["name"]: float(r["total_s"]) for r in (gp or {}).get("kernels", [])}


def _names(groups: list[dict[str, Any]], idx: list[int], k: int, what: str, why: str) -> str:
    names = ", ".join(groups[i]["name"] for i in idx)
    return f"variant {k}: {what} {names} uninstalled ({why[:160]})"


def _group_times(profile: dict[str, Any], groups: list[dict[str, Any]]) -> dict[str, float]:
    return _times(group_profile(profile, groups))


def _rows(
    seed_profiles: list[dict[str, Any] | None],
    tuned_profiles: list[dict[str, Any] | None],
    tri: Any,
    installed: dict[str, bool],
    changes: dict[str, str],
    roofline: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """The per-kernel table summed over variants: each group's time in the composed seed (Inductor's
    kernel) and in the installed candidate (Inductor's kernel where the whole draft stayed)."""
    seed: dict[str, float] = {}
    best: dict[str, float] = {}
    for sp, tp in zip(seed_profiles, tuned_profiles, strict=True):
        s = {r["name"]: float(r["total_s"]) for r in (sp or {}).get("kernels", [])}
        b = {r["name"]: float(r["total_s"]) for r in (tp or {}).get("kernels", [])}
        for name, v in s.items():
            seed[name] = seed.get(name, 0.0) + v
            best[name] = best.get(name, 0.0) + b.get(name, v)
    shares = {ks.name: ks.share for ks in tri.kernels} if tri else {}
    return [
        {
            "name": name,
            "share": shares.get(name, 0.0),
            "seed_time_s": seed[name],
            "best_time_s": best[name],
            "speedup": seed[name] / best[name] if best[name] > 0 else 1.0,
            "installed": installed.get(name, False),
            "change": changes.get(name, "") if installed.get(name, False) else "",
            # of the group's problem at the variant searched (None where no search ran)
            "roofline": (roofline or {}).get(name),
        }
        for name in sorted(seed, key=lambda n: -seed[n])
    ]
