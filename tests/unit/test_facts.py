"""Program facts are computed by a pass over the built IR, not while parsing."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.analysis import compute_facts
from tilecomm.frontend.builder import ProgramBuilder
from tilecomm.runtime.config import PLATFORMS

S = pl.InOut[pld.DistributedTensor[[4, 1], pl.INT32]]


@pl.jit.incore
def ping(a: S, b: S, peer: pl.Scalar[pl.INT32]):
    pld.system.notify(b, peer, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(a, [0, 0], 1, cmp=pld.WaitCmp.Ge)


@pl.jit
def relay(a: S, b: S, peer: pl.Scalar[pl.INT32]):
    ping(a, b, peer)


@pl.jit
def idle(a: S, b: S, peer: pl.Scalar[pl.INT32]):
    pass


@pl.jit.host
def main(out: pl.Out[pl.Tensor[[4, 1], pl.INT32]]):
    x = pld.alloc_window_buffer([4, 1], dtype=pl.INT32)
    y = pld.alloc_window_buffer([4, 1], dtype=pl.INT32)
    for r in pl.range(2):
        relay(pld.window(x, [4, 1], dtype=pl.INT32), pld.window(y, [4, 1], dtype=pl.INT32),
              1 - r, device=r)
    idle(pld.window(y, [4, 1], dtype=pl.INT32), pld.window(x, [4, 1], dtype=pl.INT32), 0,
         device=3)
    return out


def _build():
    prog, diags, _ = ProgramBuilder(main, world=4, platform=PLATFORMS["cpu"]).build()
    assert diags == []
    return prog


def test_buffer_facts():
    prog = _build()
    facts = compute_facts(prog)
    x, y = prog.buffers
    fx, fy = facts.buffer(x), facts.buffer(y)
    assert (fx.views, fx.dispatches, fx.devices) == (2, 2, frozenset({0, 1, 3}))
    assert (fy.views, fy.dispatches, fy.devices) == (2, 2, frozenset({0, 1, 3}))
    # relay notifies its second parameter (through ping): y on ranks 0 and 1; idle nothing
    assert fy.notifiers == {0: {"relay"}, 1: {"relay"}} and fx.notifiers == {}


def test_notified_parameters_follow_calls():
    prog = _build()
    facts = compute_facts(prog)
    by_name = {fn.py_name: facts.notifies[fn] for fn in prog.functions.values()}
    assert by_name == {"main": frozenset(), "relay": frozenset({1}), "ping": frozenset({1}),
                       "idle": frozenset()}


def test_building_leaves_facts_to_the_pass():
    """The IR a build returns carries no counters; two passes agree."""
    prog = _build()
    assert not hasattr(prog.buffers[0], "views")
    assert compute_facts(prog).buffer(prog.buffers[0]) == \
        compute_facts(prog).buffer(prog.buffers[0])
