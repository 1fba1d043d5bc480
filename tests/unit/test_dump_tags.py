"""Dump tags (``pl.dump_tag``, ``dumps=`` on ``pl.at`` / ``pl.submit`` / inline
chip scopes): every misuse is a typed error at the user's ``file:line:col``
before any rank starts, and the tables the compiler hands the ranks
(``KernelImage.dump_params`` / ``dump_tasks``) name exactly the tagged
arguments -- tags on a kernel's parameter reaching the tasks and dispatches
that run it, through inline calls too.  The files a run writes are checked in
``tests/ranks/test_dump_args.py``."""
import os

import numpy as np
import pytest

import bad_dump_programs as D
import bad_programs as B
import tilecomm
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from test_compile_errors import (SYNTAX, TYPE, VALUE, check_message, column_of, compile_error,
                                 config, host_args, marked_line, program_for)
from tilecomm.errors import CODES, UserError
from tilecomm.ir.functions import ProgramClass

R, C = B.R, B.C
X, Y, XS, YS = B.X, B.Y, B.XS, B.YS


@pytest.fixture(autouse=True)
def no_fork(monkeypatch):
    """A compile error must be raised before any rank process is started."""

    def forbidden():
        raise AssertionError("a process was forked although the program has a compile error")

    monkeypatch.setattr(os, "fork", forbidden)


# (program, code, classes, token at the reported column, needles)
CASES = [
    (D.at_dumps_unused, "TC445", VALUE, "t])", ["'t'", "not an argument of this task"]),
    (D.at_dumps_scalar, "TC445", TYPE, "k])", ["dumps= names tensors", "'k' is Scalar<FP32>"]),
    (D.at_dumps_not_a_list, "TC445", TYPE, "y):", ["list", "by name"]),
    (D.at_dumps_expression, "TC445", TYPE, "[y[", ["list", "by name"]),
    (D.SubmitDumpsNotAnArgument, "TC445", VALUE, "t])", ["'t'", "not a tensor argument",
                                                         "pl.submit"]),
    (D.host_inline_chip_dumps_unused, "TC445", VALUE, "xs])",
     ["'xs'", "not an argument of this chip scope"]),
    (D.host_dump_tag, "TC446", SYNTAX, "pl.dump_tag(", ["chip orchestration or kernel",
                                                        "HOST orchestrator"]),
    (D.k_dump_tag_two, "TC446", TYPE, "pl.dump_tag(", ["one tensor, by name"]),
    (D.k_dump_tag_tile, "TC446", TYPE, "t)", ["tags a tensor", "'t' is Tile[2, 8]<FP32>"]),
    (D.k_dump_tag_value, "TC446", SYNTAX, "pl.dump_tag(", ["statement of its own"]),
    (D.at_dump_tag_body_local, "TC446", VALUE, "t)", ["task's arguments",
                                                      "'t' is local to the body"]),
]


def _raise(obj):
    if isinstance(obj, ProgramClass):           # the class form compiles eagerly
        with pytest.raises(UserError) as ei:
            tilecomm.ir.compile(obj, distributed_config=config().dist)(*host_args(),
                                                                      config=config())
        return ei.value
    return compile_error(program_for(obj))


def _id(case):
    return f"{case[1]}-{getattr(case[0], 'fn', case[0]).__name__}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_misused_tags_are_located_typed_errors(case):
    obj, code, classes, token, needles = case
    e = _raise(obj)
    assert isinstance(e, classes[0]) and isinstance(e, classes[1]), type(e).__mro__
    assert e.code == code and code in CODES, str(e)
    func = obj.functions["chip"] if isinstance(obj, ProgramClass) else obj
    line, text = marked_line(func, code)
    assert os.path.realpath(e.span.file) == os.path.realpath(D.__file__)
    assert (e.line, e.col) == (line, column_of(text, token)), str(e)
    assert str(e).startswith(f"{e.span.file}:{line}:{e.col}: error[{code}]")
    check_message(e, needles)
    assert e.diagnostics == [e], str(e)


# ------------------------------------------------------------------ the tables
@pl.jit.incore
def tagged_kernel(x: X, y: Y) -> pl.Tensor[[R, C], pl.FP32]:
    pl.dump_tag(y)
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def chip_tasks(x: X, y: Y):
    t = pl.create_tensor([R, C], pl.FP32)
    u = pl.create_tensor([R, C], pl.FP32)
    pl.dump_tag(u)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="first", dumps=[x]):
        t = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="second"):
        pl.dump_tag(t)
        u = pl.store(pl.load(t, [0, 0], [R, C]), [0, 0], u)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="untagged"):
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    y = tagged_kernel(u, y)                     # a task: the kernel tags its y
    return y


@pl.jit
def chip_inline(x: X, y: Y):
    return tagged_kernel(x, y)                  # no tasks: an inline call, the dispatch dumps y


@pl.jit
def chip_untagged(x: X, y: Y):
    with pl.at(level=pl.Level.CORE_GROUP):
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


def image_of(chip):
    @pl.jit.host
    def main(xs: XS, ys: YS):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], device=r)
        return ys
    return main.compile(*host_args(), config=config()).specialise(host_args()).image


def _tasks(image):
    """{(task body function's user name, argument names): tagged names}."""
    out = {}
    for (loc, fname), idx in image.dump_tasks.items():
        fn = image.function(fname[2:])
        names = fn.__code__.co_varnames[1:fn.__code__.co_argcount]
        out[fn.__doc__.split()[2].rstrip(",")] = sorted(names[i] for i in idx)
    return out


def test_task_tables_name_exactly_the_tagged_arguments():
    image = image_of(chip_tasks)
    tasks = _tasks(image)
    assert tasks == {"chip_tasks.first": ["x"],               # dumps=
                     "chip_tasks.second": ["t", "u"],         # in the body; u: function-wide
                     "tagged_kernel": ["x", "y"]}             # its own y; u passed as its x
    assert all(loc >= 0 and image.span(loc) is not None for loc, _ in image.dump_tasks)
    # the dispatched chip function has no tagged parameter; the kernel's own y is one
    params = {image.function(f).__doc__.split()[2].rstrip(","): idx for f, idx in image.dump_params.items()}
    assert params == {"tagged_kernel": (1,)}


def test_a_tag_reaches_a_dispatch_through_inline_calls():
    image = image_of(chip_inline)
    params = {image.function(f).__doc__.split()[2].rstrip(","): idx for f, idx in image.dump_params.items()}
    assert params == {"chip_inline": (1,), "tagged_kernel": (1,)}
    assert image.dump_tasks == {}


def test_an_untagged_program_has_empty_tables():
    image = image_of(chip_untagged)
    assert image.dump_params == {} and image.dump_tasks == {}


def test_tags_generate_no_code():
    """Tagging changes nothing the ranks run when dumping is off."""
    @pl.jit
    def plain(x: X, y: Y):
        with pl.at(level=pl.Level.CORE_GROUP):
            y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
        return y

    @pl.jit
    def tagged(x: X, y: Y):
        pl.dump_tag(x)
        with pl.at(level=pl.Level.CORE_GROUP, dumps=[y]):
            pl.dump_tag(x)
            y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
        return y

    def body(image):
        src = image.source.replace("plain", "F").replace("tagged", "F")
        # docstrings name the source lines, which differ
        return [ln for ln in src.splitlines() if not ln.startswith("#") and '"""' not in ln]

    assert body(image_of(plain)) == body(image_of(tagged))
    assert image_of(tagged).dump_tasks and not image_of(plain).dump_tasks
