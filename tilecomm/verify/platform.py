"""Rules that depend on the platform profile the program is checked for."""
from __future__ import annotations

from ..errors import ProgramValueError
from ..ir.kinds import ORCH
from ..ir.types import ScalarType, TensorType
from .base import rule


@rule("tensors-before-scalars")
def tensors_before_scalars(ctx):
    """On a chip profile the runtime packs a dispatch's task arguments tensors
    first; a tensor after a scalar compiles upstream but fails when launched."""
    platform = ctx.prog.platform
    if platform is None or platform.name == "cpu":
        return
    for fn in ctx.prog.functions.values():
        if fn.kind != ORCH:
            continue
        scalar = next((p for p in fn.params if isinstance(p.type, ScalarType)), None)
        late = scalar and next((p for p in fn.params[fn.params.index(scalar):]
                                if isinstance(p.type, TensorType)), None)
        if late:
            yield ProgramValueError(
                f"parameter '{late.name}' of {fn.py_name} is a tensor after the scalar parameter "
                f"'{scalar.name}'; on the {platform.name} platform a dispatch lists its tensors "
                f"first", code="TC215", span=late.span,
                hint="move scalar parameters after every tensor parameter")
