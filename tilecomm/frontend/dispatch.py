"""Checks on a HOST orchestrator's chip dispatches that catch mistakes which
would otherwise run and give wrong results silently: a forgotten
``device=r``, and a HOST input passed where the chip writes its results."""
from __future__ import annotations

from ..errors import ProgramTypeError, ProgramValueError
from ..ir import nodes as N
from ..ir.types import INOUT, OUT, TensorType
from .common import _err

_WRITTEN = {OUT: "pl.Out", INOUT: "pl.InOut"}


class DispatchChecks:
    """Mixin of ``FunctionParser`` (HOST orchestrators only)."""

    def _rank_loop(self):
        """The variable of an enclosing ``pl.range(pld.world_size())`` loop, if any."""
        for var, (start, stop, _step, _value) in self.loops.items():
            from_world = (isinstance(stop, N.Call) and "const" in stop.extra) or \
                (isinstance(stop, N.Var) and stop.name in self.const_vars)
            if from_world and isinstance(start, N.Const) and start.value == 0:
                return var
        return None

    def check_no_device(self, callee, fn_ir, node, args):
        """A dispatch without ``device=`` is placed round-robin in submit order
        (reference 1.2), which is right only for comm-less work.  With window
        views the kernel's rank is whichever device the counter reaches, and in
        a loop over the ranks one dispatch per iteration lands on rank r by
        accident while two per iteration put them on the wrong ranks: both are
        a forgotten ``device=r``."""
        windows = [p.name for p, a in zip(fn_ir.params, args)
                   if isinstance(a.type, TensorType) and a.type.dist]
        var = self._rank_loop()
        if not windows and var is None:
            return
        name = callee.fn.__name__
        if windows:
            why = (f"it takes window views ({', '.join(windows)}): placed round-robin, the rank "
                   f"that runs it, and so the copy of each window it uses, would depend on how "
                   f"many dispatches came before it")
        else:
            why = (f"it sits in the loop over the ranks (for {var} in "
                   f"pl.range(pld.world_size())): iteration {var} would run on whichever "
                   f"device the round-robin counter reaches, not on rank {var}")
        raise _err(ProgramValueError,
                   f"{name} is dispatched without device= although {why}",
                   self.span(node), "TC227",
                   hint=f"name the rank that runs it: {name}(..., device={var or 'r'}); only "
                        f"comm-less work outside a rank loop may go without device=")

    def check_written_inputs(self, fn_ir, args):
        """A chip ``pl.Out`` / ``pl.InOut`` parameter given (a view of) a HOST
        parameter that is not ``pl.Out`` / ``pl.InOut`` itself: the chip writes
        the rank's copy, but only written HOST parameters are copied back to the
        caller's array, so the results would be thrown away."""
        host_params = self.fn.params
        for p, a in zip(fn_ir.params, args):
            pt, at = p.type, a.type
            if not (isinstance(pt, TensorType) and not pt.dist and pt.direction in _WRITTEN):
                continue
            root = a
            while isinstance(root, N.Index):       # xs[r], xs[r, 0:2]: a view of xs
                root = root.value
            origin = getattr(root.type, "origin", None)
            if not (isinstance(at, TensorType) and isinstance(origin, tuple) and
                    origin[0] == "param" and origin[1] < len(host_params)):
                continue
            hp = host_params[origin[1]]
            if hp.type.direction in _WRITTEN:
                continue
            want = _WRITTEN[pt.direction]
            raise _err(ProgramTypeError,
                       f"'{hp.name}' is an input of {self.fn.py_name} (not pl.Out / pl.InOut) but "
                       f"reaches parameter '{p.name}' of {fn_ir.py_name}, which is {want}: what "
                       f"the chip writes there would not be copied back to the caller's array",
                       a.span, "TC228",
                       hint=f"annotate '{hp.name}' as {want}[...] in {self.fn.py_name} "
                            f"(at {hp.span})")

