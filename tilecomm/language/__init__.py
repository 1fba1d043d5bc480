"""``import tilecomm.language as pl`` -- the tile language surface."""
from types import SimpleNamespace as _NS

from ..dtypes import (BF16, BOOL, FP4, FP8E4M3FN, FP8E5M2, FP8E8M0, FP16, FP32, FP64, INDEX, INT4,
                      INT8, INT16, INT32, INT64, TASK_ID, UINT4, UINT8, UINT16, UINT32, UINT64,
                      DataType)
from ..ir.enums import (FunctionType, Level, MemorySpace, PadValue, Role, ScopeMode, SplitMode,
                        TileLayout)
from ..ops.pl_matmul import matmul, move
from ..ops.pl_ops import (add, cast, const, create_tensor, div, load, max, maximum, min, minimum,
                          mul, read, store, sub, write)
from ..ops.pl_shape import assemble, reshape as _tile_reshape, row_sum as _tile_row_sum, slice
from ..ops.pl_ops import create as _tile_create, full as _tile_full
from ..ops.pl_ops import array_create as _array_create, get_block_idx
from ..ops.pl_ops import get_subblock_idx as _get_subblock_idx
from .control import (at, cond, dump_tag, manual_scope, parallel, range, scope, spmd, spmd_submit, split_aiv,
                      submit, unroll, while_, yield_)
from .jit import function, jit, program
from .typing import Array, InOut, Out, Scalar, TaskId, Tensor, Tuple, dynamic

tile = _NS(__tilecomm_namespace__="pl.tile", full=_tile_full, create=_tile_create, load=load,
           store=store, add=add, sub=sub, mul=mul, div=div, maximum=maximum, minimum=minimum,
           cast=cast, read=read, write=write, slice=slice, get_block_idx=get_block_idx,
           move=move, matmul=matmul, assemble=assemble, reshape=_tile_reshape,
           row_sum=_tile_row_sum, get_subblock_idx=_get_subblock_idx)
tensor = _NS(__tilecomm_namespace__="pl.tensor", add=add, sub=sub, mul=mul, div=div,
             maximum=maximum, minimum=minimum, cast=cast, slice=slice, read=read, write=write,
             create=create_tensor, matmul=matmul, assemble=assemble)
array = _NS(__tilecomm_namespace__="pl.array", create=_array_create)

__all__ = ["BF16", "BOOL", "FP16", "FP32", "FP64", "INDEX", "INT8", "INT16", "INT32", "INT64",
           "TASK_ID", "UINT8", "UINT16", "UINT32", "UINT64", "DataType", "FunctionType", "Level",
           "MemorySpace", "Role", "add", "cast", "const", "create_tensor", "div", "load", "max",
           "maximum", "min", "minimum", "mul", "read", "slice", "store", "sub", "write",
           "parallel", "range", "unroll", "yield_", "function", "jit", "program", "InOut", "Out",
           "Scalar", "TaskId", "Tensor", "Tuple", "dynamic", "tile", "tensor", "array", "at",
           "spmd", "manual_scope", "scope", "ScopeMode", "get_block_idx", "submit", "spmd_submit",
           "Array", "matmul", "move", "TileLayout", "FP8E4M3FN", "FP8E5M2", "FP8E8M0", "FP4", "INT4", "UINT4",
           "assemble", "PadValue", "SplitMode", "split_aiv", "while_", "cond", "dump_tag"]
