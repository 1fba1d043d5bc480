"""Dump tags: ``pl.dump_tag(t)`` statements and the ``dumps=`` keyword of
``pl.at`` / ``pl.submit`` / ``pl.spmd_submit`` and inline chip scopes.

Tags are declarations: they become sets of names on the ``FunctionIR``
(``dump_tags``) and argument indices on the ``TaskScope`` (``dumps``), never
code; ``lower.dumps`` turns them into the tables a run that dumps reads."""
from __future__ import annotations

import ast

from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir.kinds import HOST, INCORE
from ..ir.types import ANY, TensorType
from ..ops.check import describe
from .common import _err


class DumpTagParsing:
    """Mixin of ``FunctionParser`` (with ``ScopeParsing``, which calls
    ``_dump_names`` / ``_dump_indices`` for its scopes)."""

    def _dump_names(self, node, form):
        """The entries of a ``dumps=`` list (names; checked against the task's
        arguments by ``_dump_indices``)."""
        if node is None:
            return []
        if not isinstance(node, (ast.List, ast.Tuple)) or \
                not all(isinstance(e, ast.Name) for e in node.elts):
            raise _err(ProgramTypeError, f"{form}(dumps=...) takes a list of the task's tensor "
                       f"arguments by name: dumps=[a, b]", self.span(node), "TC445")
        return node.elts

    def _dump_indices(self, names, args, what) -> set:
        """Indices into ``args`` (the names a task or chip scope captures) of
        the ``dumps=`` entries ``names``; an entry that is not one of its
        tensor arguments is an error at the entry."""
        out = set()
        for e in names:
            t = self.env.get(e.id)
            if t is ANY:                  # already reported where it was bound
                continue
            if not isinstance(t, TensorType):
                raise _err(ProgramTypeError, f"dumps= names tensors; '{e.id}' is "
                           f"{describe(t) if t is not None else 'not defined here'}",
                           self.span(e), "TC445")
            if e.id not in args:
                raise _err(ProgramValueError, f"dumps= names '{e.id}', which is not an "
                           f"argument of this {what}: its body does not use it",
                           self.span(e), "TC445",
                           hint="dumps= lists tensors the body reads or writes")
            out.add(args.index(e.id))
        return out

    def dump_tag_stmt(self, call: ast.Call):
        """``pl.dump_tag(t)``: a declaration, no code.  In a task body it tags
        ``t`` for that task; elsewhere for the function (every task and
        dispatch of it that takes ``t``; see ``lower.dumps``)."""
        if self.kind == HOST:
            raise _err(ProgramSyntaxError, "pl.dump_tag tags tensors of chip orchestration or "
                       "kernel code; here it is used in a HOST orchestrator",
                       self.span(call), "TC446",
                       hint="tag the parameter in the function the host dispatches, or use "
                            "pl.at(level=pl.Level.CHIP, ..., dumps=[t])")
        if call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
            raise _err(ProgramTypeError, "pl.dump_tag takes one tensor, by name: "
                       "pl.dump_tag(t)", self.span(call), "TC446")
        name = call.args[0].id
        t = self.env.get(name)
        if t is ANY:
            return None                       # already reported where it was bound
        if not isinstance(t, TensorType):
            raise _err(ProgramTypeError, f"pl.dump_tag tags a tensor; '{name}' is "
                       f"{describe(t) if t is not None else 'not defined here'}",
                       self.span(call.args[0]), "TC446")
        if self.task is not None:
            if name not in self.task.args:
                raise _err(ProgramValueError, f"pl.dump_tag in a task body tags one of the "
                           f"task's arguments; '{name}' is local to the body",
                           self.span(call.args[0]), "TC446",
                           hint="tag it where it is created, outside the task")
            self.task.dump_tags.add(name)
        elif self.kind == INCORE and name not in {p.name for p in self.fn.params}:
            raise _err(ProgramValueError, f"pl.dump_tag in a kernel tags one of its parameters; "
                       f"'{name}' is local to the kernel", self.span(call.args[0]), "TC446")
        else:
            self.fn.dump_tags.add(name)
        return None

    def _submit_dumps(self, node, args, form) -> set:
        """Indices into the kernel arguments ``args`` of a ``pl.submit`` of the
        ``dumps=`` entries (each passed to the kernel by name)."""
        dumped = set()
        for e in self._dump_names(node, form):
            where = [i for i, a in enumerate(args) if isinstance(a, ast.Name) and a.id == e.id]
            t = self.env.get(e.id)
            if t is ANY:                  # already reported where it was bound
                continue
            if not isinstance(t, TensorType) or not where:
                raise _err(ProgramTypeError if not isinstance(t, TensorType) else
                           ProgramValueError,
                           f"dumps= names '{e.id}', which is not a tensor argument of this "
                           f"{form}: " + (f"it is {describe(t)}" if t is not None and
                                          not isinstance(t, TensorType) else
                                          "pass it to the kernel by name"),
                           self.span(e), "TC445")
            dumped.update(where)
        return dumped
