"""Everything MPI: transport, communicator, launcher, SPMD glue, RMA control
plane, host tensors.  Nothing outside this package imports mpi4py."""
