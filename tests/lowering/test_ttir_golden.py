"""Golden text tests of the TTIR parser and printer.

Each ``golden/NAME.ttir`` (TTIR as Triton prints it, or hand-written to reach every syntax form) is
parsed and printed; the text must equal ``golden/NAME.expected`` (and ``NAME.generic.expected`` where
present, for the generic form). Regenerate after an intended printer change with
``KEGEN_UPDATE_GOLDEN=1 pytest tests/lowering/test_ttir_golden.py`` and review the diff.
"""

import os
from pathlib import Path

import pytest

from lowering.ir import print_module, verify
from lowering.ir.equivalence import module_difference
from lowering.ttir import parse_ttir

GOLDEN = Path(__file__).parent / "golden"
INPUTS = sorted(GOLDEN.glob("*.ttir"))
UPDATE = os.environ.get("KEGEN_UPDATE_GOLDEN") == "1"


def _check(expected_path: Path, text: str) -> None:
    if UPDATE:
        expected_path.write_text(text)
    assert expected_path.exists(), f"missing {expected_path.name}; run with KEGEN_UPDATE_GOLDEN=1"
    assert text == expected_path.read_text()


def test_golden_inputs_exist() -> None:
    assert len(INPUTS) >= 8


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_parse_print_matches_golden(path: Path) -> None:
    module = parse_ttir(path.read_text())
    verify(module)
    _check(path.with_suffix(".expected"), print_module(module))


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_printed_text_is_a_fixpoint(path: Path) -> None:
    module = parse_ttir(path.read_text())
    text = print_module(module, locations=True)
    again = parse_ttir(text)
    assert print_module(again, locations=True) == text
    assert module_difference(module, again, locations=True) is None


@pytest.mark.parametrize("name", ["control_flow", "memory_ops", "argmax_reduce_generic"])
def test_generic_form_golden(name: str) -> None:
    module = parse_ttir((GOLDEN / f"{name}.ttir").read_text())
    text = print_module(module, generic=True)
    _check(GOLDEN / f"{name}.generic.expected", text)
    assert module_difference(module, parse_ttir(text)) is None
