"""The pass manager of the tile IR (after xDSL's `ModulePass` / `PassPipeline`).

A pass is a small frozen dataclass: a `name`, its options as typed fields, and one
``apply(module, ctx)``. Registering it (`@register_pass`) is all it takes to join the default
pipeline: nothing else lists the passes. A pass option is a field whose name is the compile option
it follows (``num_stages``, ``block_dma``, ...); a field declared with ``search_field(default,
candidates)`` is a performance option the search enumerates (`schedule_space()`; the backend's
`search_space()` is the union over the passes).

    pipeline = PassPipeline.default(options)          # options: MtiaOptions or a plain dict
    ctx = PassContext(module, options)
    pipeline.run(ctx, callback=lambda p, ctx: print(p.name))
    ctx.result("pointer-analysis")                    # what an analysis found

Analyses leave their result in the context (`ctx.results[pass name]`); transformations edit the
module in place. `run(..., verify=True)` runs the tile-IR verifier after every pass.
"""

from __future__ import annotations

import importlib
import pkgutil
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
    "registered_passes",
    "search_field",
    "search_space",
    "option_names",
    "check_option_names",
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
class Pass:
    """Base of the tile-IR passes. Subclasses are frozen dataclasses with a `name`, option fields,
    `requires` (names of passes that must run before) and `apply(module, ctx)`."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    analysis: ClassVar[bool] = False  # True: leaves a result in ctx.results, does not edit the IR

    def apply(self, module: Module, ctx: PassContext) -> None:
        raise NotImplementedError(f"pass {type(self).__name__} does not implement apply(module, ctx)")

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


P = TypeVar("P", bound=Pass)
_REGISTRY: dict[str, type[Pass]] = {}
_discovered = False


def register_pass(cls: type[P]) -> type[P]:
    """Class decorator: make `cls` known to the pass manager (and part of the default pipeline)."""
    if not cls.name:
        raise TypeError(f"pass {cls.__name__} needs a class attribute `name`")
    other = _REGISTRY.get(cls.name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"two passes are named {cls.name!r}: {other.__qualname__} and {cls.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module of `lowering.passes` and every `kegen.lowering.passes` entry point, so
    their `@register_pass` classes register (once)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    import lowering.passes as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def registered_passes() -> dict[str, type[Pass]]:
    """Every known pass by name, in dependency order (then registration order)."""
    _discover()
    ordered: dict[str, type[Pass]] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in chain:
            raise TypeError(f"passes require each other in a cycle: {' -> '.join((*chain, name))}")
        cls = _REGISTRY.get(name)
        if cls is None:
            raise TypeError(f"pass {chain[-1]!r} requires unknown pass {name!r}")
        for dep in cls.requires:
            visit(dep, (*chain, name))
        ordered[name] = cls

    for name in _REGISTRY:
        visit(name, ())
    return ordered


def search_space() -> dict[str, tuple[Any, ...]]:
    """The union of every registered pass's `schedule_space()` (a name declared twice must agree)."""
    space: dict[str, tuple[Any, ...]] = {}
    for cls in registered_passes().values():
        for name, values in cls.schedule_space().items():
            if name in space and space[name] != values:
                raise TypeError(f"option {name!r} has two candidate lists: {space[name]} and {values}")
            space[name] = values
    return space


def option_names() -> set[str]:
    """Every option some registered pass reads."""
    return {n for cls in registered_passes().values() for n in cls.option_names()}


def check_option_names(names: Iterable[str], known: Iterable[str] = ()) -> None:
    """Raise `UnknownOptionError` for a name that is neither a pass option nor in `known`, naming the
    closest valid names and listing them all (``num_stage`` -> did you mean ``num_stages``?)."""
    valid = option_names() | set(known)
    for name in names:
        _check_name(name, valid, "unknown option")


def _check_name(name: str, valid: Iterable[str], what: str) -> None:
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
    def default(cls, options: Any = None) -> PassPipeline:
        """Every registered pass, in dependency order, configured from `options`."""
        return cls(tuple(p.from_options(options) for p in registered_passes().values()))

    @classmethod
    def parse(cls, spec: str, options: Any = None) -> PassPipeline:
        """A pipeline from ``"inline-calls,pointer-analysis{block_dma=false},liveness"``: pass
        names, each with optional ``{key=value ...}`` options over those taken from `options`."""
        known = registered_passes()
        out: list[Pass] = []
        for item in _split_spec(spec):
            name, _, rest = item.partition("{")
            name = name.strip()
            _check_name(name, known, "unknown pass")
            overrides = _parse_pairs(rest.rstrip("}"))
            for key in overrides:
                _check_name(key, known[name].option_names(), f"pass {name} has no option")
            base = known[name].from_options(options)
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


def _parse_pairs(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.replace(",", " ").split():
        if "=" not in part:
            raise UnknownOptionError(f"bad pass option {part!r}: expected key=value")
        k, v = part.split("=", 1)
        out[k] = parse_value(v)
    return out


def parse_value(text: str) -> Any:
    """``true``/``false`` -> bool, integers and floats -> numbers, anything else -> the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text.strip()
