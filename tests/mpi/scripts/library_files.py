"""The MPI library's /dev/shm files once the backend has used MPI, before
any call: run under ``mpiexec -n N`` by test_mpi_departures.py, which kills
the job meanwhile.  ``runs_host_code()`` is the backend's first use of MPI
here (as it is in a script that asks before its first call).  Each process
prints the /dev/shm files it maps that still have a name, then says it is
ready (a file ``ready.<rank>`` in the directory ``READY_DIR`` names) and
waits to be killed."""
import os
import sys
import time

from tilecomm.runtime import runs_host_code


def named_shm_files() -> list:
    with open("/proc/self/maps") as f:
        paths = {line.split(None, 5)[5].strip() for line in f
                 if len(line.split(None, 5)) == 6 and "/dev/shm/" in line}
    return sorted(p for p in paths if not p.endswith("(deleted)")
                  and not os.path.basename(p).startswith("tilecomm-"))


def main() -> None:
    runs_host_code()
    me = int(os.environ.get("PMI_RANK", "0"))
    print(f"named {me}: {' '.join(named_shm_files())}", flush=True)
    with open(os.path.join(os.environ["READY_DIR"], f"ready.{me}"), "w"):
        pass
    time.sleep(600)
    sys.exit("not killed")


if __name__ == "__main__":
    main()
