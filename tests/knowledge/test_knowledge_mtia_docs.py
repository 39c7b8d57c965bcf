"""The MTIA documents cannot drift from the simulator: generated blocks and quoted figures are checked."""

import dataclasses
import re

import pytest

from kegen.knowledge import mtia_docs, mtia_isa_tables
from kegen.knowledge.store import shipped_root
from mtia_sim import isa
from mtia_sim.machine import load_machine

DOCS = mtia_docs.docs_dir()


def test_generated_blocks_match_the_simulator() -> None:
    stale = mtia_docs.stale_documents()
    assert stale == [], f"out of date: {stale}; run `python -m kegen.knowledge.mtia_docs --write`"


def test_every_renderer_is_used_and_every_block_is_known() -> None:
    used = [name for path in DOCS.glob("*.md") for name in mtia_docs.block_names(path.read_text())]
    assert set(used) == set(mtia_docs.RENDERERS), "a renderer is unused or a block has no renderer"
    assert len(used) == len(set(used)), "a block appears twice"


def test_hand_written_figures_match_the_machine_description() -> None:
    assert mtia_docs.missing_figures() == []


def test_check_fails_when_the_machine_description_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate an edit of mtia-2i.toml: both the tables and the prose checks must notice."""
    real = load_machine("mtia-2i")
    edited = dataclasses.replace(real, local_store_bytes=512 * 1024, dram_bw=409.6e9)
    import mtia_sim.machine as machine

    monkeypatch.setattr(machine, "load_machine", lambda name="mtia-2i": edited if name == "mtia-2i" else real)
    assert DOCS / "architecture.md" in mtia_docs.stale_documents()
    missing = mtia_docs.missing_figures()
    assert any("384 KiB" not in m and "512 KiB" in m for m in missing)
    assert any("409.6 GB/s" in m for m in missing)
    assert mtia_docs.main(["--check"]) == 1


def test_check_fails_when_the_isa_gains_an_opcode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        mtia_isa_tables, "_OP_NOTES", {k: v for k, v in mtia_isa_tables._OP_NOTES.items() if k != "DPE_MATMUL"}
    )
    with pytest.raises(KeyError, match="DPE_MATMUL"):
        mtia_docs.render_commands()


def test_rendered_tables_carry_the_machine_figures() -> None:
    m = load_machine("mtia-2i")
    table = mtia_docs.render_machine_table()
    assert f"{m.local_store_bytes // 1024} KiB" in table and "204.8 GB/s" in table and "1.35 GHz" in table
    derived = mtia_docs.render_derived_numbers()
    ridge = round(m.peak_flops("fp16") / m.dram_bw)
    assert f"{ridge} FLOP/byte" in derived


def test_isa_tables_list_every_register_opcode_and_field() -> None:
    text = (DOCS / "isa-reference.md").read_text()
    for reg in isa.Reg:
        assert f"`{reg.name}`" in text
    for op in isa.Op:
        assert f"`{op.name}` `{op.value:#x}`" in text
    for f in isa.Field:
        assert f"`{f.name}`" in text
    assert f"{isa.DESC_WORDS} little-endian 64-bit words" in text
    assert re.search(rf"`DRAM_BASE` \| `{isa.DRAM_BASE:#_x}`", text)


def test_write_is_idempotent(tmp_path) -> None:
    for path in DOCS.glob("*.md"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "architecture.md").write_text(
        mtia_docs._BLOCK.sub(
            lambda m: m.group(1) + "stale\n" + m.group(4), (tmp_path / "architecture.md").read_text()
        )
    )
    assert mtia_docs.write_documents(tmp_path) == [tmp_path / "architecture.md"]
    assert mtia_docs.write_documents(tmp_path) == []
    assert (tmp_path / "architecture.md").read_text() == (DOCS / "architecture.md").read_text()


def test_docs_live_in_the_shipped_knowledge_base() -> None:
    assert DOCS == shipped_root() / "hardware" / "mtia"


@pytest.mark.parametrize("name", ["mtia-v1", "mtia-2i", "mtia-300"])
def test_stated_cost_formulas_agree_with_the_simulator_cost_code(name: str) -> None:
    """The formulas written in the cost table are the simulator's: checked on every machine."""
    m = load_machine(name)
    for example in mtia_docs.cost_examples():
        assert example.predicted(m) == pytest.approx(
            mtia_docs.command_cycles(m, example.event()), rel=1e-9
        ), example.label


def test_cost_table_numbers_come_from_the_cost_code() -> None:
    m = load_machine("mtia-2i")
    table = mtia_docs.render_cost_model()
    for example in mtia_docs.cost_examples():
        assert f"| {mtia_docs.command_cycles(m, example.event()):,.0f} |" in table
