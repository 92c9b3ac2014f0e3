"""Hexadecimal elements of a float `dense<...>` literal are the float's bits, as in MLIR.

xDSL 0.75 prints an infinite or NaN element of a float dense attribute in hex
(`dense<0xFF800000> : tensor<1xf32>` for -inf) but reads a hex element back as the integer it
spells (4286578688.0): a program that went through text silently computed with the wrong
constant. Importing this module (the graph dialect does) makes the reading match the printing
and MLIR: the hex digits are the element's bit pattern, and one wider than the type is an
error. Decimal elements are read as before, but one its type cannot hold (`dense<300> :
tensor<1xi8>`, `dense<1.0e+40> : tensor<1xf16>`) is a parse error, where xDSL raised a
ValueError or OverflowError while building the attribute, and so is a finite one that would
round to infinity (`dense<1.0e+39> : tensor<1xbf16>`), where xDSL stored the infinity.

The same holds for a scalar float attribute (`eps = 1.0e39 : f32` was a silent infinity), and a
hexadecimal float with a leading minus (`-0x3F800000`, which xDSL read as the integer
-1065353216 where MLIR refuses it: the sign is a bit of the pattern) is an error in both. A
`dense<"0x...">` byte string must hold one element or exactly as many bytes as the type's
elements take (xDSL kept a short or long buffer, which failed later with a traceback or was
compiled as it was), and a string literal whose escapes are not UTF-8 is a parse error there.
"""

from __future__ import annotations

import math
import re

from xdsl.dialects.builtin import AnyFloat, DenseIntOrFPElementsAttr, FloatAttr, IntegerType
from xdsl.parser.attribute_parser import AttrParser
from xdsl.utils.exceptions import ParseError
from xdsl.utils.mlir_lexer import StringLiteral

_Element = AttrParser._TensorLiteralElement  # pyright: ignore[reportPrivateUsage]
_read_as_value = _Element.to_type


def _to_type(self: _Element, parser: AttrParser, type_: object) -> object:
    text = self.span.text.strip()
    if isinstance(type_, AnyFloat) and _NEGATIVE_HEX.match(text):
        parser.raise_error(_NEGATIVE_HEX_MESSAGE, at_position=self.span)
    if isinstance(type_, AnyFloat) and text[:2] in ("0x", "0X") and isinstance(self.value, int):
        if self.value.bit_length() > type_.bitwidth:
            parser.raise_error(
                f"hexadecimal element {text} has more bits than {type_}", at_position=self.span
            )
        raw = self.value.to_bytes(type_.compile_time_size, "little")
        return next(type_.iter_unpack(raw))
    value = _read_as_value(self, parser, type_)  # pyright: ignore[reportArgumentType]
    try:
        if isinstance(type_, IntegerType) and isinstance(value, int):
            type_.get_normalized_value(value)
        elif isinstance(type_, AnyFloat) and isinstance(value, float):
            # f16 and f32 raise on a finite value past their range; bf16 and the 8-bit
            # floats round it to infinity (or NaN) instead
            (stored,) = type_.unpack(type_.pack([value]), 1)
            if math.isfinite(value) and not math.isfinite(stored):
                raise OverflowError(value)
    except (ValueError, OverflowError):
        parser.raise_error(f"element {text} is out of range for {type_}", at_position=self.span)
    return value


_Element.to_type = _to_type  # pyright: ignore[reportAttributeAccessIssue]


_NEGATIVE_HEX = re.compile(r"-\s*0[xX]")
_NEGATIVE_HEX_MESSAGE = (
    "hexadecimal float literal should not have a leading minus (its bits give the sign)"
)
_read_scalar = AttrParser.parse_optional_builtin_int_or_float_attr


def _parse_scalar(self: AttrParser) -> object:
    """A scalar `VALUE : TYPE` attribute, refusing what `_to_type` refuses in a dense one: a
    negative hexadecimal float and a finite decimal its float type rounds to infinity."""
    start = self._current_token.span  # pyright: ignore[reportPrivateUsage]
    attr = _read_scalar(self)
    if isinstance(attr, FloatAttr) and isinstance(attr.type, AnyFloat):
        end = self._current_token.span.start  # pyright: ignore[reportPrivateUsage]
        text = start.input.content[start.start : end]
        literal = re.split(r"\s*:", text, maxsplit=1)[0].strip()
        if _NEGATIVE_HEX.match(literal):
            self.raise_error(_NEGATIVE_HEX_MESSAGE, start.start, start.start + len(literal))
        if literal[:2] not in ("0x", "0X"):
            try:
                value = float(literal.replace(" ", ""))
            except ValueError:  # not a number (`true`): xDSL's own checks apply
                return attr
            if math.isfinite(value) and not math.isfinite(attr.value.data):
                self.raise_error(
                    f"{literal} is out of range for {attr.type}",
                    start.start,
                    start.start + len(literal),
                )
    return attr


AttrParser.parse_optional_builtin_int_or_float_attr = _parse_scalar  # pyright: ignore


_read_dense = AttrParser.parse_dense_int_or_fp_elements_attr


def _parse_dense(self: AttrParser, type_: object) -> DenseIntOrFPElementsAttr:
    """A dense attribute, refusing a `"0x..."` byte string whose length is neither one element
    nor all of them (xDSL kept the bytes as given)."""
    start = self._current_token.span.start  # pyright: ignore[reportPrivateUsage]
    attr = _read_dense(self, type_)  # pyright: ignore[reportArgumentType]
    element = attr.get_element_type()
    size = getattr(element, "compile_time_size", None)
    count = math.prod(attr.get_shape())
    if size and len(attr.data.data) != size * count:
        end = self._current_token.span.start  # pyright: ignore[reportPrivateUsage]
        self.raise_error(
            f"dense byte string has {len(attr.data.data)} bytes: a {attr.type} takes "
            f"{size * count} ({count} elements of {size}), or {size} for a splat",
            start,
            end,
        )
    return attr


AttrParser.parse_dense_int_or_fp_elements_attr = _parse_dense  # pyright: ignore


def _string_contents(self: StringLiteral) -> str:
    """A string literal's text; escapes that do not spell UTF-8 (`@"\\E9t\\E9"`) are a parse
    error at the literal (a UnicodeDecodeError before, which the command line reported as
    "FILE: not UTF-8 text" of a file that is)."""
    data = self.bytes_contents
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ParseError(
            self,
            f"string literal escapes are not UTF-8 text: byte 0x{data[exc.start]:02x} at "
            f"byte {exc.start} cannot be decoded",
        ) from None


StringLiteral.string_contents = property(_string_contents)  # pyright: ignore
