"""The cases of a multi-rank test: one per transport and world size, each
with the ``RunConfig`` that runs it, and the reason it cannot run in this
session if it cannot.

``cases(world_sizes, transports)`` gives them as ``pytest.param`` values
for a plain ``@pytest.mark.parametrize``; the plugin's ``tilecomm`` marker
(``plugin.py``) is built on the same checks.

Transports: ``"shm"`` and ``"copy"`` fork their ranks from the test's own
process, so any session runs them.  ``"mpi"`` runs a call on the processes
of an MPI job, so a case of it runs only in a session that is one
(``mpiexec -n N python -m pytest ...``: every process runs the same tests)
of exactly its world size, and only with mpi4py installed; elsewhere it is
skipped, with the reason.  ``"all"`` is every transport this session can
run: the forked ones, and ``"mpi"`` too in an MPI job.
"""
from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple

import pytest

from ..runtime import DistributedConfig, RunConfig
from ..runtime.config import ALL_TRANSPORTS, MPI_LAUNCHER_VARS, MPI_TRANSPORT, TRANSPORT_NAMES

ALL = "all"
# the job's process count, as MPICH / Intel MPI (PMI) and Open MPI give it
MPI_JOB_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")


class Case(NamedTuple):
    """One run of a multi-rank test: its transport and world size."""

    transport: str
    world_size: int

    @property
    def id(self) -> str:
        return f"{self.transport}-{self.world_size}"

    def config(self, **fields) -> RunConfig:
        """A RunConfig of this case: ranks 0..world_size-1 on this transport,
        with any other RunConfig ``fields`` given."""
        devices = DistributedConfig(device_ids=list(range(self.world_size)))
        return RunConfig(distributed_config=devices, transport=self.transport, **fields)


def world_sizes_of(value) -> tuple:
    """World sizes as given (an int or a list of ints >= 1, distinct), or
    pytest.UsageError."""
    sizes = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(sizes, (list, tuple)) or not sizes or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
        raise pytest.UsageError(f"world_sizes must be a non-empty list of ints >= 1, got "
                                f"{value!r}")
    if len(set(sizes)) != len(sizes):
        raise pytest.UsageError(f"world_sizes must be distinct, got {list(sizes)}")
    return tuple(sizes)


def transports_of(value) -> tuple:
    """Transport names as given ("all", a name, or a list of names), or
    pytest.UsageError naming the known ones."""
    if value == ALL:
        return TRANSPORT_NAMES + ((MPI_TRANSPORT,) if mpi_job_size() else ())
    names = [value] if isinstance(value, str) else value
    known = f"{ALL!r}, one of {list(ALL_TRANSPORTS)} or a list of them"
    if not isinstance(names, (list, tuple)) or not names:
        raise pytest.UsageError(f"transports must be {known}, got {value!r}")
    unknown = [t for t in names if t not in ALL_TRANSPORTS]
    if unknown:
        raise pytest.UsageError(f"transports: unknown {unknown}; must be {known}")
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"transports must be distinct, got {list(names)}")
    return tuple(names)


def mpi_job_size() -> int:
    """The size of the MPI job this process belongs to; 0 if an MPI launcher
    did not start it (-1 if one did but its size is not told)."""
    if not any(os.environ.get(v) for v in MPI_LAUNCHER_VARS):
        return 0
    for var in MPI_JOB_SIZE_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return -1


def why_not_here(case: Case) -> str | None:
    """Why ``case`` cannot run in this session (None: it can)."""
    if case.transport != MPI_TRANSPORT:
        return None
    if importlib.util.find_spec("mpi4py") is None:
        return "the mpi transport needs mpi4py: pip install 'tilecomm[mpi]'"
    size = mpi_job_size()
    if size == case.world_size:
        return None
    run = f"mpiexec -n {case.world_size} python -m pytest ..."
    if size == 0:
        return f"the mpi transport runs in an MPI job of {case.world_size} processes: {run}"
    told = "of unknown size" if size < 0 else f"of {size} processes"
    return f"this session is an MPI job {told}; world size {case.world_size} runs under {run}"


def cases(world_sizes, transports=ALL) -> list:
    """``pytest.param(Case(...))`` per transport and world size, with ids
    ``<transport>-<world size>`` and a skip mark (with its reason) on a case
    this session cannot run::

        @pytest.mark.parametrize("case", cases([1, 2, 4]))
        def test_exchange(case):
            main(xs, ys, config=case.config())
    """
    sizes, names = world_sizes_of(world_sizes), transports_of(transports)
    out = []
    for case in (Case(t, n) for t in names for n in sizes):
        reason = why_not_here(case)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out
