"""Selection policies on hand-built trees: draft phase, greedy, UCT (UCB1 + widening), islands."""

from __future__ import annotations

import random

from kegen.search.config import PolicyConfig
from kegen.search.policies import GreedyPolicy, IslandPolicy, TreeView, UctPolicy, make_policy
from tests.search.search_helpers import new_run


def _add(store, run, parent, fitness, status="ok", island=None, code=None):
    nid = store.add_node(
        run, parent_id=parent, code=code or f"c{random.random()}", operator="t", island=island
    )
    store.record_evaluation(nid, status=status, fitness=fitness if status == "ok" else 0.0)
    store.backup(nid, fitness if status == "ok" else 0.0)
    return nid


def _view(store, run, exhausted=()):
    return TreeView.build(store.nodes(run), exhausted=set(exhausted))


def test_draft_phase_expands_the_root_first(store) -> None:
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    for name in ("greedy", "uct", "evolutionary"):
        pol = make_policy(PolicyConfig(name=name, draft_children=2), random.Random(0))
        sel = pol.select(_view(store, run))
        assert sel.parent_id == root and sel.phase == "draft"
    _add(store, run, root, 2.0)
    _add(store, run, root, 3.0)
    for name in ("greedy", "uct"):
        sel = make_policy(PolicyConfig(name=name, draft_children=2, epsilon=0.0), random.Random(0)).select(
            _view(store, run)
        )
        assert sel.phase == "optimize"


def test_greedy_picks_best_correct_and_skips_failed_and_exhausted(store) -> None:
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    a = _add(store, run, root, 2.0)
    _add(store, run, root, 0.0, status="incorrect")
    c = _add(store, run, root, 1.5)
    pol = GreedyPolicy(PolicyConfig(name="greedy", draft_children=1, epsilon=0.0), random.Random(0))
    assert pol.select(_view(store, run)).parent_id == a
    assert pol.select(_view(store, run, exhausted=[a])).parent_id == c
    eps = GreedyPolicy(PolicyConfig(name="greedy", draft_children=1, epsilon=1.0), random.Random(1))
    picks = {eps.select(_view(store, run)).parent_id for _ in range(30)}
    assert picks <= {root, a, c} and len(picks) > 1


def test_uct_ucb1_balances_value_and_visits(store) -> None:
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    good = _add(store, run, root, 3.0)
    for _ in range(6):  # `good` is well explored
        _add(store, run, good, 3.0)
    weak = _add(store, run, root, 1.2)
    exploit = UctPolicy(
        PolicyConfig(name="uct", draft_children=1, exploration=0.0, widening=0.1), random.Random(0)
    )
    sel = exploit.select(_view(store, run))
    assert sel.parent_id in {n.id for n in store.subtree(good)}
    explore = UctPolicy(
        PolicyConfig(name="uct", draft_children=1, exploration=50.0, widening=0.1), random.Random(0)
    )
    assert explore.select(_view(store, run)).parent_id == weak  # fewer visits win with a large c
    # UCB1 values: unvisited children are infinite, visited follow Q/N + c sqrt(ln N / n)
    view = _view(store, run)
    g = view.nodes[good]
    u = exploit.ucb(g, view.root.visits, view.max_fitness(), view)
    assert abs(u - (g.value_sum / g.visits) / 3.0) < 1e-9


def test_uct_widening_expands_a_node_with_few_children(store) -> None:
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    _add(store, run, root, 2.0)
    cfg = {"name": "uct", "draft_children": 1, "expand_best": False}
    wide = UctPolicy(PolicyConfig(**cfg, widening=10.0), random.Random(0))
    assert wide.select(_view(store, run)).parent_id == root
    narrow = UctPolicy(PolicyConfig(**cfg, widening=0.1), random.Random(0))
    assert narrow.select(_view(store, run)).parent_id != root


def test_uct_expands_a_new_best_once_before_descending(store) -> None:
    """The hold-out GEMM's tree: the best kernel (a plan under a weak 128x128 branch) sat unexpanded
    for 16 evaluations while UCB's means and widening chose elsewhere."""
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    weak = _add(store, run, root, 1.15)
    strong = _add(store, run, root, 1.3)
    for _ in range(4):  # a well-valued sibling branch
        _add(store, run, strong, 1.35)
    _add(store, run, weak, 1.0)
    best = _add(store, run, weak, 1.6)  # found under the weak branch, no children yet
    cfg = {"name": "uct", "draft_children": 1, "exploration": 0.5}
    plain = UctPolicy(PolicyConfig(**cfg, expand_best=False), random.Random(0))
    assert plain.select(_view(store, run)).parent_id != best  # the mean of `weak` hides it
    pol = UctPolicy(PolicyConfig(**cfg), random.Random(0))
    assert pol.select(_view(store, run)).parent_id == best
    _add(store, run, best, 1.5)  # once it has a child, UCB decides again
    assert pol.select(_view(store, run)).parent_id == plain.select(_view(store, run)).parent_id
    assert pol.select(_view(store, run, exhausted=[best])).parent_id != best


def test_islands_take_turns_and_migrate(store) -> None:
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    cfg = PolicyConfig(name="evolutionary", draft_children=3, islands=3, tournament=2, migration_every=4)
    pol = IslandPolicy(cfg, random.Random(0))
    drafts = []
    for i in range(3):
        sel = pol.select(_view(store, run))
        assert sel.parent_id == root and sel.island == i
        drafts.append(_add(store, run, root, 1.0 + i, island=sel.island))
    seen = []
    for _ in range(3):
        sel = pol.select(_view(store, run))
        seen.append(sel.island)
        assert store.node(sel.parent_id).island == sel.island  # tournament within the island
    assert seen == [0, 1, 2]
    sel = pol.select(_view(store, run))  # 4th selection after drafting: migration from island 2 into 0
    assert sel.island == 0 and store.node(sel.parent_id).island == 2


def test_uct_stops_widening_a_root_its_drafted_alternative_supersedes(store) -> None:
    """Inductor's draft at the root, kegen's template draft as its child 1.44x as fit (the GroupNorm
    probe): widening no longer adds mutations of the weaker root; the descent goes to the template."""
    run = new_run(store)
    root = _add(store, run, None, 1.0)
    template = store.add_node(run, parent_id=root, code="template", operator="draft")
    store.record_evaluation(template, status="ok", fitness=1.44)
    store.backup(template, 1.44)
    _add(store, run, root, 1.0)
    _add(store, run, template, 1.44)
    cfg = {"name": "uct", "draft_children": 1, "expand_best": False, "widening": 10.0}
    assert UctPolicy(PolicyConfig(**cfg, draft_supersedes=0.0), random.Random(0)).select(
        _view(store, run)
    ).parent_id == root  # widening alone keeps mutating the root
    sel = UctPolicy(PolicyConfig(**cfg), random.Random(0)).select(_view(store, run))
    assert sel.parent_id in {n.id for n in store.subtree(template)}
    close = new_run(store)  # a draft only slightly better: the root is still widened
    r2 = _add(store, close, None, 1.0)
    d2 = store.add_node(close, parent_id=r2, code="draft2", operator="draft")
    store.record_evaluation(d2, status="ok", fitness=1.1)
    store.backup(d2, 1.1)
    assert UctPolicy(PolicyConfig(**cfg), random.Random(0)).select(_view(store, close)).parent_id == r2
