"""A job aborted after the backend's first use of MPI (test_mpi_failures.py):
each process prints the topology file MPICH's launcher made for its node
(``NAMED <path>``), then process 0 aborts the job -- the launcher's proxy
then exits without removing the file, so only the backend's own removal
keeps it from being left in /tmp."""
import time

from tilecomm.backends.mpi.comm import require_mpi
from tilecomm.backends.mpi.hydrafiles import topology_file

MPI = require_mpi()
print("NAMED", topology_file(MPI), flush=True)
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.Get_rank() == 0:
    MPI.COMM_WORLD.Abort(3)
time.sleep(60)                       # the others are ended by the abort
