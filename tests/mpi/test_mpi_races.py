"""The race check under mpiexec: with every process on one node the control
block is shared memory, so notifies are numbered as on the shm transport and
every process raises the same DataRaceError, holding the call's outputs;
reached over RMA (across nodes) the check is refused, on every process,
before any rank runs."""
import pytest

from mpi_jobs import requires_mpi, run_mpi, script

pytestmark = requires_mpi
RACES = script("races.py")


@pytest.mark.parametrize("n", [2, 3])
def test_every_process_raises_the_race_and_holds_the_outputs(n):
    run = run_mpi(n, [RACES, "race", str(n)], timeout=180)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"RACED {r} {n}\n" for r in range(n)], run.output


def test_the_fixed_program_is_clean_under_mpi():
    run = run_mpi(2, [RACES, "clean", "2"], timeout=180)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"CLEAN {r}\n" for r in range(2)], run.output


def test_a_control_block_over_rma_refuses_the_check_on_every_process():
    run = run_mpi(2, [RACES, "nodes", "2"], timeout=180, env={"TILECOMM_MPI_DIRECT": "0"})
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"REFUSED {r}\n" for r in range(2)], run.output


@pytest.mark.parametrize("option", [[], ["--detect-races"]])
def test_tilecomm_run_turns_the_check_on_in_every_process(option):
    """``mpiexec -n 2 tilecomm run --detect-races SCRIPT``: the option travels
    in the environment to every process of the job."""
    run = run_mpi(2, ["-m", "tilecomm", "run", *option, RACES, "unset", "2"], timeout=180)
    assert run.returncode == 0, run.output
    want = "RACED {} 2\n" if option else "UNCHECKED {}\n"
    assert run.rank_out == [want.format(r) for r in range(2)], run.output


@pytest.mark.parametrize("name,n", [("weighted_counts", 3), ("two_sets", 3),
                                    ("set_zero_fresh_cell", 2), ("credit_barrier", 2),
                                    ("overlapping_tasks", 2)])
def test_the_happens_before_shapes_hold_under_mpi(name, n):
    """Each shape of programs_hb.py under mpiexec: the twin is clean, the racy
    form is reported on every process."""
    run = run_mpi(n, [script("hb_races.py"), name, str(n)], timeout=240)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"HB {r} {name}\n" for r in range(n)], run.output
