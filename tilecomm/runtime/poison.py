"""Memory that tells (``RunConfig(poison_windows=True)``): every data window
and every ``pl.Out`` tensor of a call starts filled with a sentinel instead
of zeros (windows) or the caller's values (outputs), so an element read
before anybody wrote it carries the sentinel into whatever is computed from
it -- a NaN in an output -- instead of passing as a zero.

The sentinel is a quiet NaN for floating dtypes whose low mantissa bits
carry ``POISON_BYTE`` (fp32 ``0x7FE5A5A5``, fp16 ``0x7FA5``, bf16
``0x7FE5``): arithmetic keeps it a NaN (on x86 with its payload), and a copy
keeps its bits, so the sentinel is told from a NaN the program computed
(``poisoned``).
Integer and bool dtypes get the byte ``POISON_BYTE`` repeated (int32
``-1515870811``, uint8 ``165``: a value a program rarely computes, easy to
spot in a dump).

Which windows are data: a window buffer is left at zero when it is
allocated as INT32 or any ``pld.window`` view of it is INT32 (``BufferInfo
.dtypes``) -- the only dtype signal cells have.  Every protocol relies on
its cells starting at 0 (a wait ``Ge 1`` would hold at once on 0xA5A5A5A5
read unsigned, a counter would start off by it), so no cell may be poisoned;
the price is that an INT32 *data* window is not poisoned either (it starts at
zero as without the option).  Every other window holds no cell and is
poisoned whole.

The controller fills the memory before the call's first dispatch goes out,
so no rank can have written it yet.  Windows of a persistent comm domain
(``prepare(persistent=True)``) keep their contents between calls by design
and are not poisoned.
"""
from __future__ import annotations

import numpy as np

POISON_BYTE = 0xA5
SIGNAL_DTYPE = "INT32"


# mantissa bits of the floating dtypes (bf16 is ml_dtypes', not numpy's)
_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def sentinel(dtype) -> np.ndarray:
    """One element of the sentinel of numpy dtype ``dtype``, as an array."""
    dt = np.dtype(dtype)
    pattern = int.from_bytes(bytes([POISON_BYTE]) * dt.itemsize, "little")
    mant = _MANTISSA.get(dt.name)
    if mant is not None:
        # the quiet NaN, its payload the pattern's bits below the quiet bit
        bits = int(np.full(1, np.nan, dt).view(_UINT[dt.itemsize])[0])
        bits |= pattern & ((1 << (mant - 1)) - 1)
        return np.array([bits], _UINT[dt.itemsize]).view(dt)
    if dt.kind in "fc":                  # another floating dtype: a plain NaN
        return np.full(1, np.nan, dt)
    return np.frombuffer(bytes([POISON_BYTE]) * dt.itemsize, dt).copy()


def fill(array: np.ndarray) -> None:
    """Poison ``array`` (any dtype, in place)."""
    array[...] = sentinel(array.dtype)[0]


def fill_bytes(memory: np.ndarray, dtype) -> None:
    """Poison uint8 ``memory`` as elements of ``dtype`` (its whole elements;
    a tail shorter than one element is left as it is)."""
    one = sentinel(dtype).view(np.uint8)
    whole = memory.size - memory.size % one.size
    if whole:
        memory[:whole].reshape(-1, one.size)[:] = one


def poisoned(array: np.ndarray) -> np.ndarray:
    """Which elements of ``array`` still hold the sentinel (bitwise: a NaN
    computed from other data is not the sentinel's bit pattern unless it was
    copied from one)."""
    one = sentinel(array.dtype).view(np.uint8)
    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(-1, one.size)
    return np.all(raw == one, axis=-1).reshape(array.shape)


def data_window(info, dtype) -> bool:
    """Whether a window buffer (``BufferInfo``) allocated as ``dtype`` (a
    tilecomm DataType) is poisoned: it can hold no signal cell."""
    return dtype.name != SIGNAL_DTYPE and SIGNAL_DTYPE not in getattr(info, "dtypes", ())


__all__ = ["POISON_BYTE", "data_window", "fill", "fill_bytes", "poisoned", "sentinel"]
