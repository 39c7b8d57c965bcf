"""Every environment variable and configuration knob kegen reads, in one typed place.

Components take their own slice (`Settings.llm`, `Settings.paths`, ...); nothing else in the
code base reads `os.environ` directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable {name}={raw!r} is not a number") from exc


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from exc


@dataclass(frozen=True)
class LLMSettings:
    """An OpenAI-compatible endpoint; unset base_url means the offline operator is used."""

    base_url: str = ""
    api_key: str = ""
    models: tuple[str, ...] = ("gpt-4o-mini",)
    temperature: float = 0.7
    max_tokens: int = 0  # KEGEN_LLM_MAX_TOKENS: the reply budget (0: auto)
    timeout_s: float = 0.0  # KEGEN_LLM_TIMEOUT_S: one proposal's deadline (0: auto)
    max_retries: int = 4
    cost_per_1k_input: float = 0.0
    cost_per_1k_output: float = 0.0
    context_tokens: int = 0  # KEGEN_LLM_CONTEXT: the served context window (0: ask the server)

    @classmethod
    def from_env(cls) -> LLMSettings:
        models = tuple(m.strip() for m in _env_str("KEGEN_LLM_MODELS", "gpt-4o-mini").split(",") if m.strip())
        return cls(
            base_url=_env_str("KEGEN_LLM_BASE_URL", _env_str("OPENAI_BASE_URL", "")),
            api_key=_env_str("KEGEN_LLM_API_KEY", _env_str("OPENAI_API_KEY", "")),
            models=models or ("gpt-4o-mini",),
            temperature=_env_float("KEGEN_LLM_TEMPERATURE", 0.7),
            max_tokens=_env_int("KEGEN_LLM_MAX_TOKENS", 0),
            timeout_s=_env_float("KEGEN_LLM_TIMEOUT_S", 0.0),
            max_retries=_env_int("KEGEN_LLM_MAX_RETRIES", 4),
            cost_per_1k_input=_env_float("KEGEN_LLM_COST_PER_1K_INPUT", 0.0),
            cost_per_1k_output=_env_float("KEGEN_LLM_COST_PER_1K_OUTPUT", 0.0),
            context_tokens=_env_int("KEGEN_LLM_CONTEXT", 0),
        )


@dataclass(frozen=True)
class SimSettings:
    """Defaults for the simulated MTIA target: KEGEN_MACHINE (the machine every compile, driver and
    simulator of the process uses, see `select_machine`), KEGEN_SIM_MAX_INSTRUCTIONS and
    KEGEN_SIM_DRAM_ARENA_BYTES (mtia_sim.Simulator's default budgets, read by it directly)."""

    machine: str = "mtia-2i"
    max_instructions: int = 200_000_000
    dram_arena_bytes: int = 1 << 30

    @classmethod
    def from_env(cls) -> SimSettings:
        return cls(
            machine=_env_str("KEGEN_MACHINE", "mtia-2i"),
            max_instructions=_env_int("KEGEN_SIM_MAX_INSTRUCTIONS", 200_000_000),
            dram_arena_bytes=_env_int("KEGEN_SIM_DRAM_ARENA_BYTES", 1 << 30),
        )


@dataclass(frozen=True)
class EvalSettings:
    """Limits for running a candidate in its sandbox process."""

    timeout_s: float = 300.0
    memory_limit_mb: int = 8192
    trials: int = 3
    seed: int = 42

    @classmethod
    def from_env(cls) -> EvalSettings:
        return cls(
            timeout_s=_env_float("KEGEN_EVAL_TIMEOUT_S", 300.0),
            memory_limit_mb=_env_int("KEGEN_EVAL_MEMORY_MB", 8192),
            trials=_env_int("KEGEN_EVAL_TRIALS", 3),
            seed=_env_int("KEGEN_EVAL_SEED", 42),
        )


@dataclass(frozen=True)
class PathSettings:
    """Where kegen keeps its state."""

    home: Path = field(default_factory=lambda: Path.home() / ".kegen")
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".kegen" / "cache")

    @classmethod
    def from_env(cls) -> PathSettings:
        home = Path(_env_str("KEGEN_HOME", str(Path.home() / ".kegen")))
        return cls(home=home, cache_dir=Path(_env_str("KEGEN_CACHE_DIR", str(home / "cache"))))


@dataclass(frozen=True)
class Settings:
    """The root configuration; build with `Settings.from_env()` or `load_settings()`."""

    llm: LLMSettings = field(default_factory=LLMSettings)
    sim: SimSettings = field(default_factory=SimSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    paths: PathSettings = field(default_factory=PathSettings)

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            llm=LLMSettings.from_env(),
            sim=SimSettings.from_env(),
            eval=EvalSettings.from_env(),
            paths=PathSettings.from_env(),
        )


def select_machine(machine: str | None) -> str:
    """Make `machine` (None: KEGEN_MACHINE, else mtia-2i) the machine of this process.

    The mtia backend compiles for, and its driver and simulator run on, the process's machine
    (`lowering.backend.options.use_machine` / `default_machine`), so commands that take `--machine`
    call this before compiling. Child processes get their machine as a value (an `EvalRequest`,
    the evaluation worker's init message, `--machine` of a subprocess). Raises ValueError naming the
    shipped machines when `machine` is neither one of them nor a readable machine TOML file.
    """
    from mtia_sim.machine import MachineDescriptionError, list_machines, load_machine

    name = machine or SimSettings.from_env().machine
    try:
        load_machine(name)
    except (MachineDescriptionError, OSError) as exc:
        raise ValueError(f"unknown machine {name!r} ({exc}); use one of {', '.join(list_machines())} "
                         "or a machine TOML path") from None
    from lowering.backend.options import use_machine

    use_machine(name)
    return name


def load_settings() -> Settings:
    """The settings for this process, read from the environment."""
    return Settings.from_env()
