"""The pass manager of the tile IR (after xDSL's `ModulePass` / `PassPipeline`).

A pass is a small frozen dataclass: a `name`, its options as typed fields, and one
``apply(module, ctx)`` (abstract here). A pass option is a field whose name is the compile option it
follows (``num_stages``, ``block_dma``, ...); a field declared with ``search_field(default,
candidates)`` is a performance option the search enumerates (`schedule_space()`). This module is the
mechanism only: the default pipeline is one explicit list in `lowering.pipeline` (`DEFAULT_PASSES`),
which also knows the passes by name for textual pipelines.

    pipeline = PassPipeline.build(passes, options)      # options: MtiaOptions or a plain dict
    ctx = PassContext(module, options)
    pipeline.run(ctx, callback=lambda p, ctx: print(p.name))
    ctx.result("pointer-analysis")                      # what an analysis found

Analyses leave their result in the context (`ctx.results[pass name]`); transformations edit the
module in place. `run(..., verify=True)` runs the tile-IR verifier after every pass. A pass outside
the default list (a researcher's, or a plugin's `kegen.lowering.passes` entry point) is made known by
name with `register_pass`, for ``--pipeline`` / `lowering.pipeline.parse_pipeline`.
"""

from __future__ import annotations

import abc
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from lowering.errors import LoweringError, did_you_mean
from lowering.ir.module import Function, Module

__all__ = [
    "Pass",
    "PassContext",
    "PassPipeline",
    "UnknownOptionError",
    "register_pass",
    "extra_passes",
    "search_field",
    "check_name",
]

ENTRY_POINT_GROUP = "kegen.lowering.passes"
SPACE = "search_space"


class UnknownOptionError(ValueError):
    """An option name no pass (and no compile option) knows; the message names the closest ones."""


def search_field(default: Any, candidates: Iterable[Any]) -> Any:
    """A pass option the search may vary: its default and its candidate values."""
    return field(default=default, metadata={SPACE: tuple(candidates)})


@dataclass
class PassContext:
    """What the passes share: the module, the compile options, and the analyses' results."""

    module: Module
    options: Any = None
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def kernel(self) -> Function:
        """The module's kernel (its first public function with a body)."""
        kernels = [f for f in self.module.kernels if not f.is_declaration]
        if not kernels:
            raise LoweringError("the module has no kernel (public tt.func with a body)")
        return kernels[0]

    def result(self, pass_name: str) -> Any:
        """The result an analysis pass left; a clear error when it has not run."""
        try:
            return self.results[pass_name]
        except KeyError:
            raise LoweringError(
                f"pass result {pass_name!r} is missing: run the {pass_name} pass first "
                f"(results so far: {', '.join(self.results) or 'none'})"
            ) from None


@dataclass(frozen=True)
class Pass(abc.ABC):
    """Base of the tile-IR passes. Subclasses are frozen dataclasses with a `name`, option fields,
    `requires` (names of passes that must run before) and `apply(module, ctx)`."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    analysis: ClassVar[bool] = False  # True: leaves a result in ctx.results, does not edit the IR

    @abc.abstractmethod
    def apply(self, module: Module, ctx: PassContext) -> None:
        """Run over `module`: edit it in place, or (an analysis) leave a result in `ctx.results`."""

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def schedule_space(cls) -> dict[str, tuple[Any, ...]]:
        """This pass's performance options and their candidate values."""
        return {f.name: f.metadata[SPACE] for f in fields(cls) if SPACE in f.metadata}

    @classmethod
    def from_options(cls: type[P], options: Any = None) -> P:
        """This pass configured from compile options (an options object or a mapping): each field
        takes the option of the same name when it is there."""
        if options is None:
            return cls()
        get = options.get if isinstance(options, Mapping) else (lambda k, d: getattr(options, k, d))
        kwargs = {}
        for f in fields(cls):
            value = get(f.name, MISSING)
            if value is not MISSING and value is not None:
                kwargs[f.name] = value
        return cls(**kwargs)

    @classmethod
    def convert_option(cls, name: str, text: str) -> Any:
        """The value of option `name` written as `text`, converted by the field's declared type
        (bool: true/false; int; float; str); a clear error for a value of the wrong type."""
        declared = typing.get_type_hints(cls).get(name)
        if declared is None or name not in cls.option_names():
            check_name(name, cls.option_names(), f"pass {cls.name} has no option")
        return convert_value(text, declared, f"option {name} of pass {cls.name}")


def convert_value(text: str, declared: Any, what: str) -> Any:
    """`text` as a value of type `declared` (bool, int, float or str); UnknownOptionError otherwise."""
    value = text.strip()
    if declared is bool:
        if value.lower() not in ("true", "false"):
            raise UnknownOptionError(f"{what} is a bool: write true or false, not {value!r}")
        return value.lower() == "true"
    if declared in (int, float):
        try:
            return declared(value)
        except ValueError:
            raise UnknownOptionError(f"{what} is {declared.__name__}: {value!r} is not one") from None
    if declared is str:
        return value
    raise UnknownOptionError(f"{what} has type {declared!r}, which a textual pipeline cannot give")


P = TypeVar("P", bound=Pass)
_EXTRA: dict[str, type[Pass]] = {}
_entry_points_loaded = False


def register_pass(cls: type[P]) -> type[P]:
    """Make `cls` known by name to textual pipelines (`lowering.pipeline.parse_pipeline`). The
    default pipeline is `lowering.pipeline.DEFAULT_PASSES`, which registering does not change."""
    if not cls.name:
        raise TypeError(f"pass {cls.__name__} needs a class attribute `name`")
    other = _EXTRA.get(cls.name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"two passes are named {cls.name!r}: {other.__qualname__} and {cls.__qualname__}")
    _EXTRA[cls.name] = cls
    return cls


def unregister_pass(name: str) -> None:
    """Forget a pass `register_pass` made known (nothing happens for an unknown name)."""
    _EXTRA.pop(name, None)


def extra_passes() -> dict[str, type[Pass]]:
    """The passes made known with `register_pass` and by `kegen.lowering.passes` entry points (each
    names a module whose import registers its passes, or a pass class), by name."""
    global _entry_points_loaded
    if not _entry_points_loaded:
        _entry_points_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            loaded = ep.load()
            if isinstance(loaded, type) and issubclass(loaded, Pass):
                register_pass(loaded)
    return dict(_EXTRA)


def check_name(name: str, valid: Iterable[str], what: str) -> None:
    """Raise `UnknownOptionError` when `name` is not in `valid`, naming the closest valid names and
    listing them all (``num_stage`` -> did you mean ``num_stages``?)."""
    names = sorted(valid)
    if name not in names:
        hint = did_you_mean(name, names, n=3)
        raise UnknownOptionError(f"{what} {name!r}: {hint}valid: {', '.join(names) or 'none'}")


Callback = Callable[[Pass, PassContext], None]


@dataclass(frozen=True)
class PassPipeline:
    """An ordered list of configured passes; `run` calls `callback` after each one."""

    passes: tuple[Pass, ...]

    @classmethod
    def build(cls, passes: Iterable[type[Pass]], options: Any = None) -> PassPipeline:
        """The passes `passes`, in that order, each configured from `options`."""
        return cls(tuple(p.from_options(options) for p in passes))

    @classmethod
    def parse(cls, spec: str, known: Mapping[str, type[Pass]], options: Any = None) -> PassPipeline:
        """A pipeline from ``"inline-calls,pointer-analysis{block_dma=false},liveness"``: names of
        passes in `known`, each with optional ``{key=value ...}`` options over those taken from
        `options`; each value is converted by the type its field declares."""
        out: list[Pass] = []
        for item in _split_spec(spec):
            name, _, rest = item.partition("{")
            name = name.strip()
            check_name(name, known, "unknown pass")
            pass_cls = known[name]
            overrides = _parse_pairs(rest.rstrip("}"), pass_cls)
            base = pass_cls.from_options(options)
            out.append(type(base)(**{**{f.name: getattr(base, f.name) for f in fields(base)}, **overrides}))
        return cls(tuple(out))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.passes]

    def run(self, ctx: PassContext, callback: Callback | None = None, *, verify: bool = False) -> PassContext:
        """Apply each pass to `ctx.module`; after each, verify (when asked) then call `callback`."""
        for p in self.passes:
            missing = [r for r in p.requires if r not in self.names[: self.names.index(p.name)]]
            if missing:
                raise LoweringError(f"pass {p.name} requires {', '.join(missing)} to run before it")
            p.apply(ctx.module, ctx)
            if verify:
                from lowering.ir.verifier import VerifierError, verify_errors

                errors = verify_errors(ctx.module)
                if errors:
                    raise VerifierError(f"after pass {p.name}: {errors[0]}") from errors[0]
            if callback is not None:
                callback(p, ctx)
        return ctx


def _split_spec(spec: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in spec:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    return [i.strip() for i in items if i.strip()]


def _parse_pairs(text: str, pass_cls: type[Pass]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.replace(",", " ").split():
        if "=" not in part:
            raise UnknownOptionError(f"bad pass option {part!r}: expected key=value")
        k, v = part.split("=", 1)
        out[k] = pass_cls.convert_option(k, v)
    return out
