"""Helpers of the MPI backend's tests: run a script under the ``mpiexec`` of
the installed MPI wheel (the one next to this Python) as a subprocess, with
a time-out, and check that it leaves nothing behind.  A module of its own,
not a conftest: the multi-rank tests import tests/conftest.py as
``conftest``."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(HERE, "scripts")
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _have_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return os.access(MPIEXEC, os.X_OK)


requires_mpi = pytest.mark.skipif(not _have_mpi(),
                                  reason="mpi4py and an MPI wheel (pip install 'tilecomm[mpi]')")


def tagged_pids(tag: str) -> list:
    """Pids of live processes whose environment carries ``tag``."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                if tag.encode() in f.read():
                    with open(f"/proc/{p}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            pids.append(int(p))
        except OSError:
            pass
    return pids


def shm_entries() -> set:
    """/dev/shm entries of tilecomm and of MPICH (other jobs' included)."""
    return {f for f in os.listdir("/dev/shm") if f.startswith(("tilecomm-", "mpich"))}


def mapped_shm() -> set:
    """/dev/shm entries some live process maps (other jobs running meanwhile)."""
    names = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/maps") as f:
                    names |= {line.rsplit("/dev/shm/", 1)[1].split()[0] for line in f
                              if "/dev/shm/" in line}
            except OSError:
                pass
    return names


class MpiRun:
    """A finished job.  ``stdout`` / ``stderr``: each process's output in
    rank order (collected per process, so lines never interleave), then
    mpiexec's own."""

    def __init__(self, proc, out, err, tag, pids, outdir, n):
        self.returncode = proc.returncode
        self.rank_out = [_read(os.path.join(outdir, f"out.{r}")) for r in range(n)]
        self.rank_err = [_read(os.path.join(outdir, f"err.{r}")) for r in range(n)]
        self.stdout = "".join(self.rank_out) + out
        self.stderr = "".join(self.rank_err) + err
        self.tag = tag
        self.pids = pids              # every process of the job seen while it ran

    @property
    def output(self):
        return self.stdout + self.stderr


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def start_mpi(n: int, argv: list, outdir: str, env=None, mpiexec=None):
    """Popen of ``mpiexec -n n python argv...``; its processes carry a tag in
    their environment, so they can be found (and must be gone) later.
    ``mpiexec``: the command up to the program (default ``mpiexec -n n``)."""
    tag = f"TILECOMM_TEST_TAG={uuid.uuid4().hex}"
    e = dict(os.environ)
    e.pop("TILECOMM_TRANSPORT", None)
    e.update(env or {})
    key, value = tag.split("=")
    e[key] = value
    e["PYTHONPATH"] = os.pathsep.join([HERE, ROOT, e.get("PYTHONPATH", "")])
    proc = subprocess.Popen([*(mpiexec or [MPIEXEC, "-n", str(n)]),
                             "-outfile-pattern", os.path.join(outdir, "out.%r"),
                             "-errfile-pattern", os.path.join(outdir, "err.%r"),
                             sys.executable, *argv], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    return proc, tag


def finish(proc, tag, argv, timeout, before, outdir, n, on_start=None) -> MpiRun:
    """Wait for the job (recording its processes), fail if it outlives
    ``timeout``, then check nothing of it is left."""
    box = {}
    reader = threading.Thread(target=lambda: box.update(zip(("out", "err"),
                                                             proc.communicate())))
    reader.start()
    pids, deadline, fired = set(), time.monotonic() + timeout, False
    while reader.is_alive() and time.monotonic() < deadline:
        now = set(tagged_pids(tag))
        pids |= now
        if on_start is not None and not fired and now:
            fired = on_start(now) is not False
        reader.join(0.05)
    if reader.is_alive():
        proc.kill()
        for pid in tagged_pids(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reader.join()
        run = MpiRun(proc, box.get("out") or "", box.get("err") or "", tag, pids, outdir, n)
        pytest.fail(f"mpiexec {' '.join(argv)} did not finish in {timeout} s:\n"
                    f"{run.stdout}\n{run.stderr}")
    assert_nothing_left(tag, pids, before)
    return MpiRun(proc, box["out"], box["err"], tag, pids, outdir, n)


def run_mpi(n: int, argv: list, timeout: float = 300, env=None, on_start=None) -> MpiRun:
    """Run ``argv`` under ``mpiexec -n n``; then check nothing of it is left:
    no process of the job, no /dev/shm entry it created.  ``on_start(pids)``
    is called with the job's processes while it runs until it returns
    something other than False."""
    with tempfile.TemporaryDirectory(prefix="tilecomm-mpi-test-") as outdir:
        return finish_job(None, argv, outdir, n, env, timeout, on_start)


def finish_job(mpiexec, argv, outdir, n, env, timeout, on_start) -> MpiRun:
    """``start_mpi`` then ``finish``: the job run to its end and checked."""
    before = shm_entries()
    proc, tag = start_mpi(n, argv, outdir, env, mpiexec)
    return finish(proc, tag, argv, timeout, before, outdir, n, on_start)


def assert_nothing_left(tag: str, pids: set, before: set) -> None:
    # the job is over; process 0's segment sweeper ends a moment after it
    deadline = time.monotonic() + 2.0
    while tagged_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = tagged_pids(tag)
    assert left == [], f"processes of the MPI job left behind: {left}"
    new = shm_entries() - before
    ours = {f for f in new if f.startswith("tilecomm-") and int(f.split("-")[1]) in pids}
    assert ours == set(), f"/dev/shm segments of the job left behind: {sorted(ours)}"
    # MPICH's files carry no pid: count those created meanwhile that no
    # live process maps (another job running meanwhile maps its own)
    stale = {f for f in new if f.startswith("mpich")} - mapped_shm()
    assert stale == set(), f"MPI's /dev/shm files left behind: {sorted(stale)}"


def rank_pid(pids, rank: int):
    """The pid of MPI process ``rank`` among a job's ``pids`` (the process
    mpiexec started, not a child of it), or None if not up yet."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                parent = f.read()
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in env and b"hydra_pmi_proxy" in parent:
            return pid
    return None


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)
