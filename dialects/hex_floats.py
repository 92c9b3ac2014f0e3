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
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import AnyFloat, IntegerType
from xdsl.parser.attribute_parser import AttrParser

_Element = AttrParser._TensorLiteralElement  # pyright: ignore[reportPrivateUsage]
_read_as_value = _Element.to_type


def _to_type(self: _Element, parser: AttrParser, type_: object) -> object:
    text = self.span.text.strip()
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
