"""A program's build directory laid out as upstream lays out its own, with
what tilecomm builds inside, so a script that looks there finds its way.

Upstream's ``output_dir`` holds the HOST orchestrator's code, one
``next_levels/<name>/`` per chip-level callable (each chip orchestration
function, and each variant of a HOST collective it instantiates from a
template, ``builtin.tensor.<op>__<options>__<dtype>``) with a
``kernel_config.py`` naming its sources, and the SubWorkers.  Here::

    orchestration/host_orch.py          the HOST orchestrator, lowered to Python
    next_levels/<chip function>/
        kernel_config.py                manifest: sources, signature, kernels
        orchestration/<name>.py         the chip orchestration function, lowered
        kernels/<kernel>.py             each InCore function it runs, lowered
    next_levels/builtin.tensor.<variant>/
        kernel_config.py                manifest: the collective and its options,
                                        the algorithm each rank runs, the calls
    sub_workers/<name>.py               each SubWorker's own source (it runs as is)

A single-chip program (no HOST orchestrator) is one chip function: its
``kernel_config.py``, ``orchestration/`` and ``kernels/`` sit at the top, as
upstream's single-chip builds.  The variant names are upstream's: the op,
then ``sum``/``max``/``min``/``prod`` (allreduce, its ring mode
``allreduce_ring``, reduce_scatter) or ``root<r>`` (broadcast), then the
data's dtype in lower case (``fp32`` always for barrier, which moves none).

Manifests are written when the program is compiled (from its IR); lowered
sources when a specialisation is lowered (at once for a program whose
parameters have static shapes, else at its first call).  The lowered files
are slices of one module (``compiled.lowered(...).filename``), for reading:
the whole module is what runs.  Nothing here is read back.
"""
from __future__ import annotations

import inspect
import os
import pprint
import shutil

from ..ir import nodes as N
from ..ir import walk
from ..ir.kinds import HOST, INCORE, ORCH
from ..ir.types import IN, INOUT, OUT, TensorType

MARK = "# tilecomm build manifest"
ALGORITHMS = "tilecomm.collectives.algorithms"
_DIRS = {IN: "IN", OUT: "OUT", INOUT: "INOUT"}


class _Rooted(str):
    """A path relative to the manifest, written as upstream's are:
    ``str(_ROOT_DIR / "...")``."""

    def __repr__(self):
        return f"str(_ROOT_DIR / {str(self)!r})"


def variant(call: N.Call) -> str:
    """Upstream's name of the chip-level callable a HOST collective call is."""
    op = call.record.name.rsplit(".", 1)[-1]
    args = call.args

    def const(name):
        e = args.get(name)
        return e.value if isinstance(e, N.Const) else None

    def dtype(name):
        t = getattr(args.get(name), "type", None)
        return t.dtype.name.lower() if isinstance(t, TensorType) and t.dtype else "unknown"

    def reduce_op():
        v = const("op")
        return v.name.lower() if v is not None else "sum"

    if op == "allreduce":
        name = "allreduce_ring" if const("mode") == "ring" else "allreduce"
        return f"builtin.tensor.{name}__{reduce_op()}__{dtype('target')}"
    if op == "reduce_scatter":
        return f"builtin.tensor.reduce_scatter__{reduce_op()}__{dtype('target')}"
    if op == "broadcast":
        return f"builtin.tensor.broadcast__root{const('root')}__{dtype('target')}"
    if op == "barrier":
        return "builtin.tensor.barrier__fp32"
    return f"builtin.tensor.{op}__{dtype('target')}"


def _host_collectives(prog) -> dict:
    """{variant: [calls]} of the HOST collectives of the program."""
    out: dict = {}
    for fn in prog.functions.values():
        if fn.kind != HOST:
            continue
        for e in walk.exprs(fn.body):
            if isinstance(e, N.Call) and e.record.collective:
                out.setdefault(variant(e), []).append(e)
    return out


def _kernels(fn) -> list:
    """The InCore functions a chip function runs (calls and task bodies), in order."""
    out = []
    for e in walk.exprs(fn.body):
        if isinstance(e, N.FuncCall) and e.func.kind == INCORE and e.func not in out:
            out.append(e.func)
    return out


def _signature(fn) -> list:
    return [_DIRS[p.type.direction] if isinstance(p.type, TensorType) else "SCALAR"
            for p in fn.params]


def _slices(lowered) -> dict:
    """{function name: its lowered source} cut from the lowered module."""
    if lowered is None:
        return {}
    out, name, lines = {}, None, []
    for line in lowered.source.splitlines():
        if line.startswith("def f_"):
            name, lines = line[len("def f_"):].split("(", 1)[0], []
        if name is not None:
            lines.append(line)
            out[name] = lines
    return {n: "\n".join(ls).rstrip() + "\n" for n, ls in out.items()}


def _source(path, text, fn, lowered) -> None:
    head = (f"# {fn.kind} function {fn.py_name} ({fn.span}), lowered by tilecomm: one slice of "
            f"the module that runs,\n# {lowered.filename}; edits are not read back\n"
            f"from tilecomm import dtypes as _dt  # noqa: F401\n\n\n")
    _write(path, head + text)


def _write(path, text) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _manifest(path, what: str, fields: dict) -> None:
    body = "".join(f"{k} = {pprint.pformat(v, width=96, compact=True, sort_dicts=False)}\n\n"
                   for k, v in fields.items())
    _write(path, f"{MARK}: {what}.\n# Plain data for scripts; tilecomm does not read it.\n"
                 f"from pathlib import Path\n\n_ROOT_DIR = Path(__file__).parent\n\n{body}")


def _rooted(*parts) -> str:
    return _Rooted("/".join(parts))


def _chip(root, fn, prog, config, slices, lowered) -> None:
    kernels = _kernels(fn)
    if fn.name in slices:
        _source(os.path.join(root, "orchestration", f"{fn.name}.py"), slices[fn.name], fn,
                lowered)
        for k in kernels:
            if k.name in slices:
                _source(os.path.join(root, "kernels", f"{k.name}.py"), slices[k.name], k,
                        lowered)
    _manifest(os.path.join(root, "kernel_config.py"), f"chip orchestration function {fn.name}", {
        "RUNTIME_CONFIG": {"runtime": "tilecomm", "platform": config.platform,
                           "world_size": prog.world},
        "ORCHESTRATION": {"source": _rooted("orchestration", f"{fn.name}.py"),
                          "function_name": f"f_{fn.name}", "user_function": fn.py_name,
                          "defined_at": str(fn.span), "signature": _signature(fn)},
        "KERNELS": [{"func_id": i, "name": k.name, "user_function": k.py_name,
                     "source": _rooted("kernels", f"{k.name}.py"), "core_type": "aiv",
                     "signature": _signature(k)} for i, k in enumerate(kernels)],
    })


def _builtin(root, name, calls, prog, config) -> None:
    first = calls[0]
    opts = {k: (v.value.name if hasattr(v.value, "name") else v.value)
            for k, v in first.args.items() if isinstance(v, N.Const) and
            k in ("op", "mode", "core_num", "root")}
    _manifest(os.path.join(root, "kernel_config.py"), f"HOST collective {name}", {
        "RUNTIME_CONFIG": {"runtime": "tilecomm", "platform": config.platform,
                           "world_size": prog.world},
        "BUILTIN": {"collective": first.record.name, "variant": name, "options": opts,
                    "algorithm": f"{ALGORITHMS}.{first.record.name.rsplit('.', 1)[-1]}",
                    "runs": "on each member rank, as one dispatch in its dispatch order",
                    "calls": [str(c.span) for c in calls]},
        "ORCHESTRATION": {"function_name": name.split("__", 1)[0],
                          "operands": [p for p in first.args
                                       if not isinstance(first.args[p], N.Const)]},
        "KERNELS": [],
    })


def _clear_stale(top, keep) -> None:
    """Remove ``next_levels/*`` directories an earlier build wrote and this one
    does not (only those holding a manifest of ours)."""
    if not os.path.isdir(top):
        return
    for d in os.listdir(top):
        path = os.path.join(top, d)
        cfg = os.path.join(path, "kernel_config.py")
        if d in keep or not os.path.isfile(cfg):
            continue
        with open(cfg, encoding="utf-8") as f:
            ours = f.read(len(MARK)) == MARK
        if ours:
            shutil.rmtree(path, ignore_errors=True)


def write(output_dir, prog, config, lowered=None, sub_workers=None,
          single_chip=False) -> None:
    """Lay out ``prog`` (verified IR; ``lowered``: its lowering, if done) under
    ``output_dir``.  ``sub_workers``: {name: KernelFunction} of the program;
    ``single_chip``: its entry is the HOST wrapper of its one chip function."""
    out = os.fspath(output_dir)
    slices = _slices(lowered)
    entry = prog.entry
    chips = [f for f in prog.functions.values() if f.kind == ORCH]
    if single_chip:                       # the wrapper's one statement dispatches it
        _chip(out, entry.body[0].value.func, prog, config, slices, lowered)
        return
    if entry.name in slices:
        _source(os.path.join(out, "orchestration", "host_orch.py"), slices[entry.name], entry,
                lowered)
    top = os.path.join(out, "next_levels")
    builtins = _host_collectives(prog)
    _clear_stale(top, {f.name for f in chips} | set(builtins))
    for fn in chips:
        _chip(os.path.join(top, fn.name), fn, prog, config, slices, lowered)
    for name, calls in builtins.items():
        _builtin(os.path.join(top, name), name, calls, prog, config)
    for name, kfn in (sub_workers or {}).items():
        try:
            text = inspect.getsource(kfn.fn)
        except (OSError, TypeError):
            continue
        _write(os.path.join(out, "sub_workers", f"{name}.py"),
               f"# SubWorker {kfn.fn.__qualname__}: run as is, in the calling process\n{text}")


__all__ = ["MARK", "variant", "write"]
