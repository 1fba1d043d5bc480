"""Numpy implementations of the cube path: ``pl.move`` and ``pl.matmul``.

Memory spaces are checked when the program is compiled (the tile type
carries them); here a move is a copy -- a new buffer on the chip, so a later
``pl.write`` into one tile must not show through the other -- and a matmul
accumulates the way the cube does: FP16 / BF16 / FP8 products are summed in
FP32 (numpy's float32 matmul accumulates in float32), INT8 in INT32, and the
accumulator is rounded once to ``out_dtype`` on its way out.
"""
from __future__ import annotations

import numpy as np

from . import blas
from ...values import Tile, make_tile, valid_region


def _operand(x, transpose):
    a = np.asarray(x)
    if a.dtype.kind in "iu":
        a = a.astype(np.int32)
    elif a.dtype != np.float32:
        a = a.astype(np.float32)      # exact for FP16, BF16 and FP8 values
    return a.T if transpose else a


class MatmulOps:
    """Mixin of ``KernelOps``."""

    def move(self, tile, target_memory, blayout=None, slayout=None):
        return make_tile(np.array(tile), getattr(tile, "valid", None))

    def matmul(self, lhs, rhs, out_dtype=None, a_trans=False, b_trans=False, c_matrix_nz=False):
        tiles = isinstance(lhs, Tile)
        lhs_arr = getattr(lhs, "local", lhs)
        rhs_arr = getattr(rhs, "local", rhs)
        if not self.__dict__.get("_blas_single"):   # once per context: see blas.py
            blas.single_thread()
            self._blas_single = True
        acc = np.matmul(_operand(lhs_arr, a_trans), _operand(rhs_arr, b_trans))
        out = acc if out_dtype is None else acc.astype(out_dtype.np_dtype)
        if not tiles:
            return out
        valid = None
        if lhs.valid is not None or getattr(rhs, "valid", None) is not None:
            lv, rv = valid_region(lhs), valid_region(rhs)
            valid = (lv[1] if a_trans else lv[0], rv[0] if b_trans else rv[1])
        return make_tile(out, valid)


__all__ = ["MatmulOps"]
