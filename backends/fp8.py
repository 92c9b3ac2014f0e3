"""FP8 numerics for the reference executors and the runtime: rounding, bits and values.

Numpy has no 8-bit floats. As for bf16, the executors hold FP8 tensors as float32 arrays of
FP8-representable values; the runtime passes their bytes. The two formats are those of
torch and CUDA: e4m3fn (4 exponent bits, bias 7, 3 mantissa bits, no infinities, one NaN
pattern per sign, largest 448) and e5m2 (5 exponent bits, bias 15, 2 mantissa bits, IEEE
infinities and NaNs, largest 57344). Rounding is to nearest, ties to even, as torch converts:
e4m3fn saturates (a value past 448, infinity included, becomes ±448), e5m2 overflows to
infinity (from 61440, the midpoint past 57344).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from xdsl.dialects.builtin import Float8E4M3FNType, Float8E5M2Type
from xdsl.ir import Attribute


@dataclass(frozen=True)
class Fp8Format:
    """An 8-bit float format: its field widths and overflow rule."""

    exponent_bits: int
    mantissa_bits: int
    largest: float
    saturates: bool
    """Whether an overflow becomes the largest finite value (e4m3fn) rather than infinity."""

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @cached_property
    def values(self) -> np.ndarray:
        """The float64 value of each of the 256 bit patterns (NaN where it is one)."""
        bits = np.arange(256)
        sign = np.where(bits >> 7, -1.0, 1.0)
        exponent = (bits >> self.mantissa_bits) & (2**self.exponent_bits - 1)
        mantissa = bits & (2**self.mantissa_bits - 1)
        fraction = mantissa / 2**self.mantissa_bits
        normal = (1 + fraction) * 2.0 ** (exponent - self.bias)
        subnormal = fraction * 2.0 ** (1 - self.bias)
        out = sign * np.where(exponent == 0, subnormal, normal)
        top = exponent == 2**self.exponent_bits - 1
        if self.saturates:  # e4m3fn: only S.1111.111 is NaN
            out[top & (mantissa == 2**self.mantissa_bits - 1)] = np.nan
        else:  # e5m2: IEEE, an all-ones exponent is infinity or NaN
            out[top] = np.where(mantissa[top] == 0, sign[top] * np.inf, np.nan)
        return out

    def round(self, a: np.ndarray) -> np.ndarray:
        """Round to the nearest value of the format (ties to even), as float32."""
        x = np.asarray(a, np.float64)
        magnitude = np.abs(x)
        _, exponent = np.frexp(np.where(magnitude > 0, magnitude, 1.0))
        exponent = np.maximum(exponent - 1, 1 - self.bias)  # subnormals share the least one
        quantum = np.ldexp(1.0, exponent - self.mantissa_bits)
        with np.errstate(invalid="ignore"):
            rounded = np.copysign(np.round(magnitude / quantum) * quantum, x)
        past = np.abs(rounded) > self.largest
        overflow = np.copysign(self.largest if self.saturates else np.inf, x)
        out = np.where(past | np.isinf(x), overflow, rounded)
        return np.where(np.isnan(x), np.nan, out).astype(np.float32).reshape(np.shape(a))

    def bits(self, values: np.ndarray) -> np.ndarray:
        """The uint8 patterns of float32 values the format holds (`round`'s results)."""
        table = self.values
        finite = np.flatnonzero(~np.isnan(table) & ~((table == 0) & (np.arange(256) >> 7 == 1)))
        order = finite[np.argsort(table[finite], kind="stable")]
        x = np.asarray(values, np.float64)
        position = np.searchsorted(table[order], x)
        found = order[np.clip(position, 0, len(order) - 1)]
        if np.any(~np.isnan(x) & (table[found] != x)):
            raise ValueError("a value the FP8 format does not hold (round it first)")
        negative_zero = (x == 0) & np.signbit(x)
        nan = 0x7F if self.saturates else 0x7E
        out = np.where(np.isnan(x), nan, np.where(negative_zero, 0x80, found))
        return out.astype(np.uint8).reshape(np.shape(values))

    def decode(self, bits: np.ndarray) -> np.ndarray:
        """The float64 values of uint8 patterns."""
        return self.values[np.asarray(bits, np.uint8)]


E4M3FN = Fp8Format(exponent_bits=4, mantissa_bits=3, largest=448.0, saturates=True)
E5M2 = Fp8Format(exponent_bits=5, mantissa_bits=2, largest=57344.0, saturates=False)


def fp8_format(element_type: Attribute) -> Fp8Format | None:
    """The format of an FP8 element type, or None for any other type."""
    if isinstance(element_type, Float8E4M3FNType):
        return E4M3FN
    if isinstance(element_type, Float8E5M2Type):
        return E5M2
    return None
