"""Stable small ids of the collectives: a blocked rank publishes the id of the
collective it is inside (an int in the control plane), the deadlock report
turns it back into the op's name."""

COLLECTIVES = ("pld.tensor.allreduce", "pld.tensor.barrier", "pld.tensor.broadcast",
               "pld.tensor.allgather", "pld.tensor.reduce_scatter", "pld.tensor.all_to_all",
               "pld.tensor.all_to_all_v")

NO_COLLECTIVE = -1


def collective_id(name: str) -> int:
    return COLLECTIVES.index(name)


def collective_name(cid: int) -> str | None:
    return COLLECTIVES[cid] if 0 <= cid < len(COLLECTIVES) else None
