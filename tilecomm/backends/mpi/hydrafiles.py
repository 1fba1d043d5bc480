"""The file MPICH's launcher leaves in /tmp when a job ends badly.

Hydra's proxy (one per node of a job) writes the node's hardware topology to
``/tmp/hydra_hwloc_xmlfile_XXXXXX`` for the MPI library to load at
initialisation instead of probing the machine in every process, and removes
it when it exits normally -- not when the job is aborted or a peer is
killed, so every such job leaves one file on every node.  The name reaches
the processes only over PMI (a job attribute, ``PMI_hwloc_xmlfile``), so on
its first use of MPI each process asks its proxy for it over the PMI socket
it inherited (``PMI_FD``, the PMI-1 wire protocol) and removes it.

Why it is safe to remove then: MPICH loads the topology early in
``MPI_Init``, before the processes of a node meet in the barrier of their
shared-memory initialisation, so once ``MPI_Init`` returned in any process
of the node, every one of them has loaded it (the argument of
``comm.unlink_library_segments``).  The proxy's own removal at exit then
finds nothing, which it ignores.

Why it is safe to speak PMI here: the library speaks it in ``MPI_Init`` and
``MPI_Finalize`` (and when it aborts) on the thread that calls them, and
this runs between the two on the thread making the backend's first MPI
call, before the backend starts threads of its own.  Every request is
answered at once by the proxy; anything else than the expected answer -- an
MPI that is not MPICH, another launcher, another PMI version -- and this
does nothing.
"""
from __future__ import annotations

import os
import select

KEY = "PMI_hwloc_xmlfile"
PREFIX = "/tmp/hydra_hwloc_xmlfile_"
ANSWER_S = 5.0     # the proxy answers at once; this only bounds a broken one


def _fields(line: str) -> dict:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def _ask(fd: int, line: str) -> dict:
    # the library's own descriptor, used as it is: a socket timeout would
    # set O_NONBLOCK on the description the library shares (select instead)
    data = line.encode()
    while data:
        data = data[os.write(fd, data):]
    buf = b""
    while not buf.endswith(b"\n"):
        if not select.select([fd], [], [], ANSWER_S)[0]:
            raise OSError("PMI: no answer")
        got = os.read(fd, 4096)
        if not got:
            raise OSError("PMI connection closed")
        buf += got
    return _fields(buf.decode())


def topology_file(MPI) -> str | None:
    """The topology file Hydra's proxy made for this process's node, if this
    is an MPICH job under Hydra speaking PMI-1 (None otherwise)."""
    fd = os.environ.get("PMI_FD")
    if not fd or not fd.isdigit() or os.environ.get("PMI_VERSION", "1") != "1" or \
            not MPI.Get_library_version().startswith("MPICH"):
        return None
    try:
        me = _ask(int(fd), "cmd=get_my_kvsname\n")
        if me.get("cmd") != "my_kvsname" or me.get("rc") != "0" or "kvsname" not in me:
            return None
        got = _ask(int(fd), f"cmd=get kvsname={me['kvsname']} key={KEY}\n")
    except (OSError, ValueError):
        return None
    value = got.get("value", "")
    if got.get("cmd") == "get_result" and got.get("rc") == "0" and value.startswith(PREFIX):
        return value
    return None


def unlink_topology_file(MPI) -> None:
    """On this process's first use of MPI: remove its node's topology file."""
    path = topology_file(MPI)
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass            # another process of the node was first
