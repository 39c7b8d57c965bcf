"""TTIR text → tile IR `Module`, with lark's LALR parser over ``ttir.lark``."""

from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from lowering.compat import normalize_text
from lowering.ir.module import Module
from lowering.ir.types import Type
from lowering.ttir.builder import IRBuilder
from lowering.ttir.errors import TTIRError, TTIRParseError
from lowering.ttir.raw import RawModule, RawTransformer

__all__ = ["parse_ttir", "parse_type_text", "ttir_parser", "GRAMMAR_PATH"]

GRAMMAR_PATH = Path(__file__).with_name("ttir.lark")


@functools.lru_cache(maxsize=1)
def ttir_parser() -> Lark:
    """The (cached) lark LALR parser, with the raw-record transformer applied while parsing."""
    return Lark(
        GRAMMAR_PATH.read_text(),
        parser="lalr",
        lexer="contextual",
        start=["start", "stype"],
        transformer=RawTransformer(parse_type_text),
        maybe_placeholders=False,
        propagate_positions=False,
        # no cache file: lark's is a pickle in the shared temp dir, which anyone (a candidate in an
        # unsandboxed worker) could plant; building costs ~0.1 s once per process
        cache=False,
    )


@functools.lru_cache(maxsize=4096)
def parse_type_text(text: str) -> Type:
    """A type from its MLIR text (``tensor<64x!tt.ptr<f32>>``), with the grammar's `stype` rule; cached."""
    t = ttir_parser().parse(text, start="stype")
    assert isinstance(t, Type)
    return t


def parse_raw(text: str) -> RawModule:
    """Parse TTIR text into raw records (no SSA resolution); raises `TTIRParseError`."""
    if not text.endswith("\n"):
        text += "\n"
    text = normalize_text(text)  # other Triton releases' type spellings (lowering.compat)
    try:
        raw = ttir_parser().parse(text, start="start")
    except UnexpectedToken as exc:
        tok = exc.token
        found = "end of input" if tok.type == "$END" else f"{tok.type} {str(tok)!r}"
        expected = sorted(_nice(e) for e in exc.expected)
        raise TTIRParseError(f"unexpected {found}", exc.line, exc.column, text, expected) from None
    except UnexpectedCharacters as exc:
        raise TTIRParseError(
            f"unexpected character {text[exc.pos_in_stream or 0]!r}",
            exc.line,
            exc.column,
            text,
            sorted(_nice(e) for e in (exc.allowed or ())),
        ) from None
    except UnexpectedEOF as exc:
        raise TTIRParseError(
            "unexpected end of input", 0, 0, text, sorted(_nice(e) for e in exc.expected)
        ) from None
    except UnexpectedInput as exc:
        raise TTIRParseError(str(exc), getattr(exc, "line", 0), getattr(exc, "column", 0), text) from None
    except TTIRError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as exc:  # a transformer callback rejected a value
        raise TTIRParseError(f"malformed TTIR: {exc}", 0, 0, text) from None
    except VisitError as exc:
        if isinstance(exc.orig_exc, TTIRError):
            raise exc.orig_exc from None
        meta = getattr(exc.obj, "meta", None)
        line = getattr(meta, "line", 0) if meta is not None else 0
        raise TTIRParseError(f"malformed {exc.rule}: {exc.orig_exc}", line or 0, 1, text) from None
    assert isinstance(raw, RawModule)
    return raw


def parse_ttir(text: str) -> Module:
    """Parse TTIR text (as Triton prints it, pretty or generic op forms) into a tile-IR `Module`.

    Raises `TTIRParseError` for malformed text (with line, column and a snippet) and
    `UnsupportedOpError` for an op the tile IR does not know (with the kernel source line).
    """
    raw = parse_raw(text)
    return IRBuilder(text if text.endswith("\n") else text + "\n", raw).build_module()


_TOKEN_NAMES = {
    "_NL": "newline",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "LESSTHAN": "'<'",
    "MORETHAN": "'>'",
    "LSQB": "'['",
    "RSQB": "']'",
    "VALUE_ID": "%value",
    "OPNAME": "op name",
    "CARET_ID": "^block",
    "SYMBOL_REF": "@symbol",
    "HASH_ID": "#alias",
    "STRING": "string",
    "INT": "integer",
    "FLOAT": "float",
    "BARE_ID": "keyword",
    "TENSOR_OPEN": "tensor<...>",
    "INT_TYPE": "integer type",
    "FLOAT_TYPE": "float type",
}


def _nice(name: str) -> str:
    """A token name as a user reads it: ``'loc'``, ``%value``, ``newline``."""
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    try:
        pattern = ttir_parser().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return repr(pattern.value)
    return name.lower().replace("_", " ").strip()
