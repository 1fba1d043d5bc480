"""Stable small ids of the collectives: a blocked rank publishes the id of the
collective it is inside (an int in the control plane), the deadlock report
turns it back into the op's name."""

# The one list of the collectives: each is an algorithm of that name in
# ``algorithms.py``, a registry record ``pld.tensor.<name>`` (``collective=True``),
# a method of that name on the rank context and the HOST runtime, and a HOST
# builtin dispatch ``builtin.tensor.<name>``; their order gives the ids.
NAMES = ("allreduce", "barrier", "broadcast", "allgather", "reduce_scatter", "all_to_all",
         "all_to_all_v")
COLLECTIVES = tuple(f"pld.tensor.{name}" for name in NAMES)

NO_COLLECTIVE = -1


def collective_id(name: str) -> int:
    return COLLECTIVES.index(name)


def collective_name(cid: int) -> str | None:
    return COLLECTIVES[cid] if 0 <= cid < len(COLLECTIVES) else None
