"""The lifeline's rules (backends/mpi/lifeline.py), without MPI: who beats
with whom, which hosts count as lost, and the silence that makes them so.
The lifeline itself runs in the two-host tests (tests/mpi/test_twohost_faults.py)."""
import pytest

from tilecomm.backends.mpi.lifeline import LOST_S, lost_after, lost_hosts, watched
from tilecomm.errors import ConfigError

HOSTS = ["a", "a", "b", "b", "c"]


def test_process_0s_host_watches_every_other_process_and_the_others_watch_it():
    assert watched(HOSTS, 0) == watched(HOSTS, 1) == [2, 3, 4]
    assert watched(HOSTS, 2) == watched(HOSTS, 3) == watched(HOSTS, 4) == [0, 1]
    # symmetric: a bye reaches every process that watches the sender
    for p in range(len(HOSTS)):
        assert all(p in watched(HOSTS, q) for q in watched(HOSTS, p))


def test_a_host_is_lost_only_when_all_its_watched_processes_are_silent():
    now = 100.0
    heard = {2: now - 6, 3: now - 1, 4: now - 0.1}
    assert lost_hosts(HOSTS, heard, now, 5.0) == []          # 2 is busy, b lives
    heard[3] = now - 5.5
    assert lost_hosts(HOSTS, heard, now, 5.0) == ["b"]
    heard[4] = now - 9
    assert lost_hosts(HOSTS, heard, now, 5.0) == ["b", "c"]
    # a process that said bye is no longer watched: its host's others decide
    assert lost_hosts(HOSTS, {3: now - 1}, now, 5.0) == []


def test_the_silence_is_set_by_the_environment(monkeypatch):
    monkeypatch.delenv("TILECOMM_MPI_LOST_S", raising=False)
    assert lost_after() == LOST_S
    monkeypatch.setenv("TILECOMM_MPI_LOST_S", "12.5")
    assert lost_after() == 12.5
    for bad in ("0.5", "-3", "soon", "nan"):
        monkeypatch.setenv("TILECOMM_MPI_LOST_S", bad)
        with pytest.raises(ConfigError, match=r"TILECOMM_MPI_LOST_S must be a number of "
                                              r"seconds of at least 1, got") as e:
            lost_after()
        assert e.value.code == "TC402"
