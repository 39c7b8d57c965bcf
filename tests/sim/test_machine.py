"""Machine descriptions: shipped files, derived figures, and validation errors that name file and key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mtia_sim.machine import (
    DEFAULT_MACHINE,
    MACHINES_DIR,
    MachineDescription,
    MachineDescriptionError,
    list_machines,
    load_machine,
)

FUNCTIONAL_NEEDS = ("name", "num_pes", "cores_per_pe", "local_store_bytes", "sram_bytes", "dram_bytes", "clock_hz")


def _toml_text(data: dict, prefix: str = "") -> str:
    """A tiny TOML writer for nested tables of scalars (tests only)."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    lines = [f"[{prefix}]"] if prefix and scalars else []
    for k, v in scalars.items():
        if isinstance(v, bool):
            lines.append(f"{k} = {str(v).lower()}")
        else:
            lines.append(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"')
    text = "\n".join(lines) + "\n"
    for k, v in tables.items():
        text += _toml_text(v, f"{prefix}.{k}" if prefix else k)
    return text


def _raw(name: str = DEFAULT_MACHINE) -> dict:
    return tomllib.loads((MACHINES_DIR / f"{name}.toml").read_text())


def _write(tmp_path: Path, data: dict, name: str = "m.toml") -> Path:
    path = tmp_path / name
    path.write_text(_toml_text(data))
    return path


def test_shipped_machines_load():
    assert {"mtia-v1", "mtia-2i", "mtia-300"} <= set(list_machines())
    for name in list_machines():
        m = load_machine(name)
        assert isinstance(m, MachineDescription)
        assert m.name == name
        for attr in FUNCTIONAL_NEEDS:
            assert getattr(m, attr)


def test_default_is_mtia_2i_with_published_figures():
    m = load_machine()
    assert m.name == "mtia-2i" and m.clock_hz == 1.35e9
    assert (m.pe_rows, m.pe_cols, m.num_pes, m.cores_per_pe) == (8, 8, 64, 2)
    assert m.local_store_bytes == 384 * 1024 and m.local_store_bw == 1e12
    assert m.sram_bytes == 256 << 20 and m.sram_bw == 2.7e12
    assert m.dram_bw == 204.8e9 and m.dram_channels == 16 and m.dram_bytes == 128 << 30
    assert m.pe_peak_flops("fp16") == pytest.approx(2.76e12, rel=0.01)
    assert m.peak_flops("bf16") == pytest.approx(177e12, rel=0.01)
    assert m.peak_flops("int8") == pytest.approx(2 * m.peak_flops("fp16"))
    assert m.peak_flops("fp32") < m.peak_flops("fp16")
    assert m.simd_elements_per_cycle(2) == 32
    assert m.launch_overhead_ns < 1000 and m.job_replacement_ns < 500
    assert m.local_store_bytes_per_cycle == pytest.approx(740.7, rel=1e-3)


def test_other_generations():
    v1, m300 = load_machine("mtia-v1"), load_machine("mtia-300")
    assert v1.clock_hz == 800e6 and v1.local_store_bytes == 128 * 1024 and v1.dram_bw == 176e9
    assert v1.peak_flops("fp16") == pytest.approx(51.2e12)
    assert (m300.pe_rows, m300.pe_cols, m300.num_pes) == (12, 6, 72)
    assert m300.dram_bw == 6.1e12 and m300.sram_bw == 11.4e12 and m300.local_store_bw == 1.9e12
    assert m300.pe_peak_flops("bf16") == pytest.approx(7.82e12, rel=0.01)


def test_derived_helpers():
    m = load_machine()
    assert m.hops(0, 63) == 14 and m.hops(9, 9) == 0 and m.pe_coords(10) == (1, 2)
    assert m.dram_bytes_per_cycle == pytest.approx(204.8e9 / 1.35e9)
    assert m.dpe_flops_per_cycle_for_width(1) == m.dpe_flops_per_cycle_int8
    assert m.dpe_flops_per_cycle_for_width(4) == m.dpe_flops_per_cycle_fp32
    assert "mtia-2i" in m.summary() and "204.8 GB/s" in m.summary()
    with pytest.raises(ValueError, match="unknown DPE dtype"):
        m.dpe_flops_per_cycle("fp64")
    assert hash(m) == hash(load_machine("mtia-2i"))  # frozen, usable as a cache key


def test_load_by_path_round_trips(tmp_path):
    path = _write(tmp_path, _raw())
    assert load_machine(path) == load_machine(DEFAULT_MACHINE)
    assert load_machine(str(path)) == load_machine(DEFAULT_MACHINE)


def test_bandwidth_comes_from_the_file(tmp_path):
    data = _raw()
    data["dram"]["bw"] = 100e9
    data["dpe"]["flops_per_cycle"]["fp16"] = 1024.0
    m = load_machine(_write(tmp_path, data))
    assert m.dram_bw == 100e9 and m.peak_flops("fp16") == pytest.approx(1024 * 64 * 1.35e9)


def test_unknown_machine_name_lists_available():
    with pytest.raises(MachineDescriptionError, match="unknown machine 'mtia-9'.*mtia-2i"):
        load_machine("mtia-9")


def test_missing_file(tmp_path):
    with pytest.raises(MachineDescriptionError, match="cannot read"):
        load_machine(tmp_path / "nope.toml")


def test_bad_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("name = \n")
    with pytest.raises(MachineDescriptionError, match=r"bad\.toml: not valid TOML"):
        load_machine(path)


def test_missing_key_names_file_and_key(tmp_path):
    data = _raw()
    del data["dram"]["bw"]
    path = _write(tmp_path, data)
    with pytest.raises(MachineDescriptionError, match=r"m\.toml: missing key 'dram\.bw'"):
        load_machine(path)


def test_unknown_key(tmp_path):
    data = _raw()
    data["dram"]["bandwidth"] = 1.0
    with pytest.raises(MachineDescriptionError, match=r"unknown key 'dram\.bandwidth'"):
        load_machine(_write(tmp_path, data))


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("sram", "bw", "fast", "expected a number, got str"),
    ("grid", "pe_rows", 8.5, "expected an integer"),
    ("grid", "pe_rows", True, "expected a number, got bool"),
    ("dram", "bw", 0.0, "must be > 0"),
    ("local_store", "bytes", -1, "must be > 0"),
    ("dma", "setup_cycles", -1.0, "must be >= 0"),
    ("grid", "cores_per_pe", 3, "at most 2 cores"),
    ("local_store", "bytes", 2 << 20, "PE window stride"),
])
def test_bad_values(tmp_path, section, key, value, message):
    data = _raw()
    data[section][key] = value
    with pytest.raises(MachineDescriptionError, match=rf"m\.toml: key '{section}\.{key}': .*{message}"):
        load_machine(_write(tmp_path, data))


def test_zero_latency_is_allowed(tmp_path):
    data = _raw()
    data["dram"]["latency_ns"] = 0
    data["launch"]["overhead_ns"] = 0
    m = load_machine(_write(tmp_path, data))
    assert m.dram_latency_cycles == 0 and m.launch_overhead_cycles == 0


def test_name_spelling_is_forgiven():
    assert load_machine("mtia2i").name == "mtia-2i"
    assert load_machine("MTIA_300").name == "mtia-300"
