"""bfloat16 conversions on uint16 bit patterns (numpy has no bfloat16 dtype).

A bfloat16 is the upper half of an IEEE binary32: 1 sign bit, 8 exponent bits
and 7 stored significand bits, so it has float32's range (largest finite
value 0x7F7F = 3.3895e38, smallest normal 2**-126, subnormals down to
2**-133) with 8 significant bits. convpool takes and returns bfloat16 tensors
as numpy uint16 arrays holding these bit patterns.

    bits = float32_to_bfloat16(np.array([1.0, 1/3, np.nan], np.float32))
    # array([16256, 16043, 32704], dtype=uint16)
    values = bfloat16_to_float32(bits)   # float32, exact

Pure numpy; does not need libconvpool.
"""

import numpy as np

__all__ = ["float32_to_bfloat16", "bfloat16_to_float32", "bfloat16_round_float64",
           "BFLOAT16_MAX", "BFLOAT16_TINY"]

BFLOAT16_MAX = float(np.uint32(0x7F7F0000).view(np.float32))   #: largest finite bfloat16
BFLOAT16_TINY = 2.0 ** -126                                     #: smallest normal bfloat16

_QUIET_BIT = np.uint16(0x0040)      # the top stored significand bit: a quiet NaN


def _round_float32_bits(a32):
    """bfloat16 bits of a float32 array, round to nearest even (bit arithmetic).

    Adding 0x7FFF plus the lowest kept bit to the float32 pattern and dropping
    the low 16 bits rounds the magnitude to nearest, ties to even; a carry out
    of the significand moves to the next binade and, past the largest finite
    value, to the infinity pattern 0x7F80. This holds for subnormals too. NaN
    patterns are handled separately: their payload may sit in the dropped
    bits, and the carry could turn them into infinities.
    """
    a32 = np.asarray(a32, dtype=np.float32, order="C")
    bits = a32.view(np.uint32)
    lowest_kept = (bits >> np.uint32(16)) & np.uint32(1)
    with np.errstate(over="ignore"):
        rounded = ((bits + np.uint32(0x7FFF) + lowest_kept) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(a32)
    if nan.any():
        # Keep the sign and the upper payload, and set the quiet bit so that
        # the result is a NaN even when the whole payload was in the low bits.
        nan_bits = (bits >> np.uint32(16)).astype(np.uint16) | _QUIET_BIT
        rounded = np.where(nan, nan_bits, rounded)
    return rounded


def bfloat16_round_float64(a):
    """Round float64 values to the bfloat16 grid (nearest even); returns float64.

    Rounds directly from float64, so no double rounding through float32. The
    spacing of the grid at v is 2**(e-8) for v = m * 2**e with 0.5 <= |m| < 1
    (8 significant bits), but never below 2**-133 (the subnormal spacing);
    v / spacing is exact (a power-of-two scaling) and np.rint rounds it half
    to even. Magnitudes that round to 2**128 or beyond are returned as inf:
    the float64 result 2**128 is what the tie rule gives at the overflow
    midpoint (0x7F7F has an odd last bit), and anything above it overflows
    too. NaN stays NaN, +-0 and +-inf are unchanged.
    """
    v = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        _, exponent = np.frexp(v)
        exponent = np.maximum(exponent, -125)     # zero: any spacing keeps it zero
        spacing = np.ldexp(1.0, exponent - 8)
        rounded = np.rint(v / spacing) * spacing
        rounded = np.where(np.abs(rounded) >= 2.0 ** 128, np.copysign(np.inf, v), rounded)
    return np.where(np.isfinite(v), rounded, v)


def float32_to_bfloat16(a):
    """Round values to bfloat16 (nearest, ties to even); returns a uint16 array of bit patterns.

    a: an array-like of real numbers; the result has its shape. float32 and
    float16 inputs are rounded from their float32 value (float16 converts
    exactly). Other inputs (float64, integers, lists of Python floats) are
    rounded directly from float64, so a float64 value is not rounded twice
    (float64 -> float32 -> bfloat16 can differ from the correctly rounded
    result).

    NaN stays NaN (sign and upper payload kept, quiet bit set); +-inf stays
    +-inf; a finite value whose magnitude rounds above the largest bfloat16
    (3.3895e38) becomes +-inf; -0.0 keeps its sign; values below 2**-126
    round to bfloat16 subnormals (or zero).
    """
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"float32_to_bfloat16 needs real numbers, got dtype {arr.dtype}")
    if arr.dtype in (np.float32, np.float16):
        return np.asarray(_round_float32_bits(arr.astype(np.float32, copy=False)))
    rounded = bfloat16_round_float64(arr.astype(np.float64))
    # Every bfloat16 value is a float32 whose low 16 bits are zero, so this
    # conversion is exact (infinities and NaN included) and the rounding below
    # changes nothing but the NaN payloads.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(_round_float32_bits(rounded.astype(np.float32)))


def bfloat16_to_float32(a):
    """Decode bfloat16 bit patterns to float32 (exact); returns a float32 array.

    a: a uint16 array (or an array-like of integers in 0..65535) of bfloat16
    bit patterns, as convpool takes and returns them.
    """
    arr = np.asarray(a)
    if arr.dtype != np.uint16:
        if arr.dtype.kind not in "iu":
            raise TypeError("bfloat16_to_float32 needs uint16 bit patterns, got dtype "
                            f"{arr.dtype} (use float32_to_bfloat16 to convert values)")
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFF):
            raise ValueError("bfloat16 bit patterns must lie in 0..65535")
        arr = arr.astype(np.uint16)
    return np.asarray(arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
