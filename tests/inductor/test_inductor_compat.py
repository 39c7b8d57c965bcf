"""kegen.compat: Inductor options the installed torch lacks are emulated or dropped with one warning
per process; torch's internal FutureWarnings are filtered, others are not."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from kegen import compat


def test_a_missing_option_is_dropped_with_one_warning_per_process(monkeypatch: Any) -> None:
    import torch._inductor.config as config

    monkeypatch.setattr(compat, "_warned", set())
    wanted = {"compile_threads": 1, "mtia.no_such_option_in_any_torch": True}
    with pytest.warns(UserWarning, match="no Inductor option 'mtia.no_such_option_in_any_torch'"):
        assert compat.inductor_options(wanted) == {"compile_threads": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second use warns no more
        with compat.patched_inductor_options(wanted):
            assert config.compile_threads == 1


def test_welford_off_is_emulated_where_torch_lacks_the_option(monkeypatch: Any) -> None:
    from torch._inductor import lowering

    current = lowering.use_two_step_variance  # kegen.inductor.enable() may have emulated it already
    original = getattr(current, "_kegen_original", current)
    monkeypatch.setattr(lowering, "use_two_step_variance", original)  # the state is restored after
    monkeypatch.setattr(compat, "_has_option", lambda config, key: key != "mtia.disable_welford_reduction")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # emulated: no warning
        with compat.patched_inductor_options({"mtia.disable_welford_reduction": True}):
            assert lowering.use_two_step_variance(None, axis=[0], keepdim=False) is True
    assert lowering.use_two_step_variance is original  # undone on exit
    compat.set_inductor_options({"mtia.disable_welford_reduction": True})
    try:
        assert lowering.use_two_step_variance is not original
    finally:
        compat.set_inductor_options({"mtia.disable_welford_reduction": False})
    assert lowering.use_two_step_variance is original


def test_torch_internal_future_warnings_are_filtered_and_others_are_not() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with compat.quiet_torch_internals():
            warnings.warn(
                "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)`",
                FutureWarning,
                stacklevel=1,
            )
            warnings.warn("something a user can act on", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something a user can act on"]


def test_spec_is_single() -> None:
    class Spec:
        def __init__(self, n: int) -> None:
            self.num_children = n

    assert compat.spec_is_single(Spec(0), 1) and not compat.spec_is_single(Spec(2), 2)
    assert compat.spec_is_single(None, 1) and not compat.spec_is_single(None, 2)
