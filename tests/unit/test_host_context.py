"""A HOST orchestrator cannot read or write tensor elements: its dispatches run
asynchronously on the ranks, so a value read there would race with them."""
import numpy as np
import pytest

import tilecomm.language as pl
from tilecomm.errors import ProgramSyntaxError
from tilecomm.runtime import DistributedConfig, RunConfig


@pl.jit.host
def reads(xs: pl.Tensor[[2, 4], pl.FP32]):
    v = pl.read(xs, [0, 0])  # E:read


@pl.jit.host
def writes(xs: pl.Out[pl.Tensor[[2, 4], pl.FP32]]):
    pl.write(xs, [0, 0], 1.0)  # E:write


@pytest.mark.parametrize("entry, marker", [(reads, "# E:read"), (writes, "# E:write")])
def test_element_access_in_host_is_rejected(entry, marker):
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    with pytest.raises(ProgramSyntaxError) as ei:
        entry(np.zeros((2, 4), np.float32), config=cfg)
    e = ei.value
    line, text = next((i, l) for i, l in enumerate(open(__file__), 1) if marker in l)
    assert (e.code, e.line, e.col) == ("TC301", line, text.index("pl.") + 1)
    assert "HOST orchestrator" in e.message and e.hint
