"""Which arguments each dispatch and each task dumps under
``RunConfig(enable_dump_args=1)`` (reference 5.1): the tables a rank reads
only in a run that dumps.  Tags generate no code, so they cost nothing when
dumping is off.

A tensor is tagged by ``pl.dump_tag(t)`` in the function that names it, by
``dumps=[t]`` on one ``pl.at`` / ``pl.submit`` task, or by ``dumps=`` on an
inline chip scope.  A tag in a function holds for the whole function, and it
reaches the caller through an inline call (a kernel called by a chip
orchestration function that submits no tasks): the caller's tensor passed by
name to a tagged parameter is tagged in the caller.  A task dumps its arguments that its ``dumps=`` names, that
its body function tags, and that its orchestration function tags; a
dispatch dumps the parameters its function tags."""
from __future__ import annotations

from ..ir import nodes as N
from ..ir import walk
from ..ir.kinds import HOST
from ..ir.types import TensorType


class DumpTables:
    """``params``: function name -> indices of the parameters a dispatch of it
    dumps; ``tasks``: (span id of the task, name of its lowered body
    function) -> indices of the task arguments it dumps.  Only non-empty
    entries are kept."""

    def __init__(self, prog: N.ProgramIR, span_ids: dict, py_name):
        self._tagged: dict = {}
        self.params: dict = {}
        self.tasks: dict = {}
        for fn in prog.functions.values():
            tagged = self.tagged_names(fn)
            idx = _tensor_indices(fn.params, lambda i, p: p.name in tagged)
            if idx and fn.kind != HOST:
                self.params[fn.name] = idx
            for s, _ in walk.stmts_in_loops(fn.body):
                if not isinstance(s, N.TaskScope):
                    continue
                callee, args = s.call.func, s.call.args
                inner = self.tagged_names(callee)
                own = set(s.dumps)
                idx = _tensor_indices(callee.params, lambda i, p: i in own or p.name in inner or
                                      isinstance(args[i], N.Var) and args[i].name in tagged)
                if idx:
                    self.tasks[(span_ids[s.span], py_name(callee))] = idx

    def tagged_names(self, fn) -> set:
        """The names ``fn`` tags: its own ``pl.dump_tag``s and the names it
        passes to tagged parameters of functions it calls inline."""
        got = self._tagged.get(fn.name)
        if got is not None:
            return got
        self._tagged[fn.name] = set()        # a call cycle adds nothing more
        out = set(fn.dump_tags)
        if fn.kind != HOST:                 # a HOST call is a dispatch: not inline
            tasks = {id(s.call) for s, _ in walk.stmts_in_loops(fn.body)
                     if isinstance(s, N.TaskScope)}
            for e in walk.exprs(fn.body):
                if isinstance(e, N.FuncCall) and id(e) not in tasks:
                    inner = self.tagged_names(e.func)
                    for p, a in zip(e.func.params, e.args):
                        if p.name in inner and isinstance(a, N.Var):
                            out.add(a.name)
        self._tagged[fn.name] = out
        return out


def _tensor_indices(params, keep) -> tuple:
    return tuple(i for i, p in enumerate(params)
                 if isinstance(p.type, TensorType) and keep(i, p))


__all__ = ["DumpTables"]
