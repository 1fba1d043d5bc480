"""Programs with one misuse of dump tags each (``dumps=`` / ``pl.dump_tag``),
for ``test_dump_tags.py``.  The offending line carries ``# E:<code>``; chip
functions and kernels are wrapped by ``bad_programs.host_for_chip`` /
``host_for``."""
import tilecomm.language as pl

from bad_programs import R, C, SIG, WIN, X, XS, Y, YS, host_for_chip


@pl.jit
def at_dumps_unused(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.create_tensor([R, C], pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, dumps=[y, t]):  # E:TC445
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def at_dumps_scalar(x: X, y: Y, win: WIN, sig: SIG):
    k = pl.read(x, [0, 0])
    with pl.at(level=pl.Level.CORE_GROUP, dumps=[k]):  # E:TC445
        y = pl.store(pl.mul(pl.load(x, [0, 0], [R, C]), k), [0, 0], y)
    return y


@pl.jit
def at_dumps_not_a_list(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, dumps=y):  # E:TC445
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def at_dumps_expression(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, dumps=[y[0:1, 0:C]]):  # E:TC445
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.program
class SubmitDumpsNotAnArgument:
    @pl.function(type=pl.FunctionType.InCore)
    def copy(self, x: X, y: Y) -> pl.Tensor[[R, C], pl.FP32]:
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: X, y: Y):
        t = pl.create_tensor([R, C], pl.FP32)
        y, tid = pl.submit(self.copy, x, y, dumps=[y, t])  # E:TC445
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: XS, ys: YS):
        for r in pl.range(2):
            self.chip(xs[r], ys[r], device=r)
        return ys


@pl.jit.incore
def copy_rows(x: X, y: Y):
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit.host
def host_inline_chip_dumps_unused(xs: XS, ys: YS):
    with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator, dumps=[xs]):  # E:TC445
        y = ys[0]
        y = copy_rows(y, y)
    return ys


@pl.jit.host
def host_dump_tag(xs: XS, ys: YS):
    pl.dump_tag(ys)  # E:TC446
    return ys


@pl.jit.incore
def k_dump_tag_two(x: X, y: Y, win: WIN, sig: SIG):
    pl.dump_tag(x, y)  # E:TC446
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit.incore
def k_dump_tag_tile(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    pl.dump_tag(t)  # E:TC446
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_dump_tag_value(x: X, y: Y, win: WIN, sig: SIG):
    z = pl.dump_tag(y)  # E:TC446
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def at_dump_tag_body_local(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        t = pl.create_tensor([R, C], pl.FP32)
        pl.dump_tag(t)  # E:TC446
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


submit_main = SubmitDumpsNotAnArgument
__all__ = ["host_for_chip"]
