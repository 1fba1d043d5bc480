"""A HOST program of a file named on the command line (``FILE.py::NAME``),
and its arguments made from its annotations: what ``tilecomm explore`` and
``tilecomm run`` call it with.  ``--dim`` and ``--scalar`` bind what the
annotations leave open."""
from __future__ import annotations

import contextlib
import os
import sys

import click
import numpy as np

from ..ir.annotations import annotation_type
from ..ir.functions import KernelFunction
from ..ir.kinds import HOST
from ..ir.types import Dim, ScalarType, TensorType, bind_shape
from .programs import _annotation, load_module


def program_options(max_ranks: int, only: str = ""):
    """The options that say how to call a ``FILE.py::NAME`` program:
    ``--ranks``, ``--dim``, ``--scalar`` (``only``: a note that starts each
    help text, for a verb that also takes other targets)."""
    options = [
        click.option("--ranks", "-n", type=click.IntRange(1, max_ranks), default=None,
                     help=f"{only}The world size.  Default: the size the file's own "
                          f"DistributedConfig(device_ids=...) spells literally, else 2."),
        click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
                     help=f"{only}Bind the pl.dynamic dim NAME of the parameters "
                          f"(repeatable); unbound dims are the world size."),
        click.option("--scalar", "scalars", multiple=True, metavar="NAME=NUMBER",
                     help=f"{only}The value of a scalar parameter (repeatable)."),
    ]

    def apply(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn
    return apply


def split_target(target: str) -> tuple:
    """(path, NAME) of ``FILE.py::NAME``, the file checked to exist."""
    path, sep, name = target.rpartition("::")
    if not sep or not name or not path:
        raise click.UsageError(f"expected FILE.py::NAME, got {target!r}")
    if not os.path.isfile(path):
        raise click.UsageError(f"no such file: {path}")
    return path, name


def load_quietly(path: str):
    """The file imported as ``load_module`` does, its own prints sent to
    stderr (stdout is the verb's answer)."""
    with contextlib.redirect_stdout(sys.stderr):
        return load_module(path)


def host_entry(target: str) -> tuple:
    """(path, the @pl.jit.host function) that ``FILE.py::NAME`` names."""
    path, name = split_target(target)
    entry = getattr(load_quietly(path), name, None)
    if not isinstance(entry, KernelFunction) or entry.kind != HOST:
        raise click.UsageError(f"{name} in {path} is not a @pl.jit.host function")
    return path, entry


def host_args(entry: KernelFunction, world: int, dims: dict, scalars: dict) -> list:
    """Arguments for ``entry`` from its annotations: inputs of small integers
    (sums stay exact) from a fixed seed, outputs zero; every ``pl.dynamic``
    dim not in ``dims`` is the world size.  (``self`` of a ``@pl.program``
    method is no argument.)"""
    rng = np.random.default_rng(0)
    code = entry.fn.__code__
    out = []
    for name in code.co_varnames[int(entry.is_method):code.co_argcount]:
        t = annotation_type(_annotation(entry, name))
        if isinstance(t, ScalarType):
            if name not in scalars:
                raise click.UsageError(f"parameter {name!r} is a scalar: give its value with "
                                       f"--scalar {name}=VALUE")
            out.append(scalars[name])
            continue
        if not isinstance(t, TensorType) or t.shape is None:
            raise click.UsageError(f"parameter {name!r} has no tensor shape in its annotation "
                                   f"(pl.Tensor[[shape], dtype]): its value cannot be made")
        free = {v for d in t.shape if isinstance(d, Dim) for v in d.free_vars()}
        shape = bind_shape(t.shape, {v: dims.get(v.name, world) for v in free})
        if not all(isinstance(d, int) for d in shape):
            raise click.UsageError(f"parameter {name!r}: shape {shape} is not a constant "
                                   f"once its dims are bound; bind them with --dim")
        dtype = t.dtype.np_dtype
        if t.direction == "Out":
            out.append(np.zeros(shape, dtype))
        else:
            out.append(rng.integers(-8, 8, shape).astype(dtype))
    return out


def scalar_values(values) -> dict:
    out = {}
    for v in values:
        name, sep, num = v.partition("=")
        try:
            out[name] = float(num) if "." in num else int(num)
        except ValueError:
            sep = ""
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"expected NAME=NUMBER, got {v!r}", param_hint="--scalar")
    return out


def dim_values(values) -> dict:
    out = {}
    for v in values:
        name, sep, num = v.partition("=")
        if not sep or not name.isidentifier() or not num.strip().isdigit() or int(num) <= 0:
            raise click.BadParameter(f"expected NAME=VALUE with a positive integer value, got "
                                     f"{v!r}", param_hint="--dim")
        out[name] = int(num)
    return out
