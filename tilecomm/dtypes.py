"""Element types of tensors, tiles and scalars, and their numpy/torch mapping."""
from __future__ import annotations

import numpy as np


class DataType:
    """One element type.  Instances are singletons compared by identity."""

    __slots__ = ("name", "_np", "bits", "is_float", "is_int", "atomic_code")

    def __init__(self, name: str, np_dtype, bits: int, *, is_float=False, is_int=False,
                 atomic_code: int | None = None):
        self.name = name
        # a callable is resolved on first use: ml_dtypes costs ~1.5 s to import,
        # which every rank-free program (and every example) would otherwise pay
        self._np = np_dtype if callable(np_dtype) and not isinstance(np_dtype, type) \
            else np.dtype(np_dtype)
        self.bits = bits
        self.is_float = is_float
        self.is_int = is_int
        # dtype code of the native atomic-add loop, None if not addable
        self.atomic_code = atomic_code

    @property
    def np_dtype(self) -> np.dtype:
        if not isinstance(self._np, np.dtype):
            self._np = np.dtype(self._np())
        return self._np

    def get_byte(self) -> int:
        """Element size in bytes, rounded up (FP32 -> 4, BF16 -> 2)."""
        return (self.bits + 7) // 8

    def __repr__(self) -> str:
        return f"pl.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


FP32 = DataType("FP32", np.float32, 32, is_float=True, atomic_code=0)
FP16 = DataType("FP16", np.float16, 16, is_float=True, atomic_code=1)
def _bfloat16():
    import ml_dtypes
    return ml_dtypes.bfloat16


BF16 = DataType("BF16", _bfloat16, 16, is_float=True, atomic_code=2)
INT32 = DataType("INT32", np.int32, 32, is_int=True, atomic_code=3)
INT16 = DataType("INT16", np.int16, 16, is_int=True, atomic_code=4)
INT8 = DataType("INT8", np.int8, 8, is_int=True, atomic_code=5)
INT64 = DataType("INT64", np.int64, 64, is_int=True, atomic_code=7)
UINT8 = DataType("UINT8", np.uint8, 8, is_int=True)
UINT16 = DataType("UINT16", np.uint16, 16, is_int=True)
UINT32 = DataType("UINT32", np.uint32, 32, is_int=True)
UINT64 = DataType("UINT64", np.uint64, 64, is_int=True)
FP64 = DataType("FP64", np.float64, 64, is_float=True, atomic_code=6)
def _ml(name):
    def resolve():
        import ml_dtypes
        return getattr(ml_dtypes, name)
    return resolve


# the 8- and 4-bit types of the reference's dtype list that ml_dtypes provides
# (HF4 / HF8 have no numpy type); a 4-bit element occupies one byte of an array
FP8E4M3FN = DataType("FP8E4M3FN", _ml("float8_e4m3fn"), 8, is_float=True)
FP8E5M2 = DataType("FP8E5M2", _ml("float8_e5m2"), 8, is_float=True)
FP8E8M0 = DataType("FP8E8M0", _ml("float8_e8m0fnu"), 8, is_float=True)   # MX scale: 2**e
FP4 = DataType("FP4", _ml("float4_e2m1fn"), 4, is_float=True)
INT4 = DataType("INT4", _ml("int4"), 4, is_int=True)
UINT4 = DataType("UINT4", _ml("uint4"), 4, is_int=True)
BOOL = DataType("BOOL", np.bool_, 8)
INDEX = DataType("INDEX", np.int64, 64, is_int=True)
TASK_ID = DataType("TASK_ID", np.int64, 64, is_int=True)

ALL = [FP32, FP16, BF16, INT32, INT16, INT8, INT64, UINT8, UINT16, UINT32, UINT64, FP64, BOOL,
       INDEX, TASK_ID, FP8E4M3FN, FP8E5M2, FP8E8M0, FP4, INT4, UINT4]
_BY_NAME = {d.name: d for d in ALL}

# dtypes the hardware atomic add (remote_store / put / store with atomic=Add) supports
ATOMIC_ADD_DTYPES = (FP32, BF16, FP16, INT32, INT16, INT8)


def by_name(name: str) -> DataType:
    return _BY_NAME[name]


def from_numpy(dt) -> DataType | None:
    """The tilecomm dtype of a numpy dtype (INT64 for int64, never INDEX)."""
    dt = np.dtype(dt)
    if dt.name == "bfloat16":
        return BF16
    for d in (FP32, FP16, INT32, INT16, INT8, INT64, UINT8, UINT16, UINT32, UINT64, FP64, BOOL):
        if d.np_dtype == dt:
            return d
    if dt.kind in "Vf":                  # ml_dtypes types (checked last: importing it is slow)
        for d in (FP8E4M3FN, FP8E5M2, FP8E8M0, FP4, INT4, UINT4):
            if dt == d.np_dtype:
                return d
    return None


def compatible(declared: DataType, actual: DataType) -> bool:
    """Whether a host array of ``actual`` may bind a parameter of ``declared``."""
    if declared is actual:
        return True
    return declared in (INDEX, TASK_ID) and actual is INT64
