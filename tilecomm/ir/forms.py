"""Control-flow forms (``pl.range``, ``pl.unroll``, ``pl.yield_``).  The front
end recognises them by identity; calling them outside a program is an error."""


class SpecialForm:
    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name}() is only meaningful inside a tilecomm program")

    def __repr__(self):
        return f"<tilecomm form {self.name}>"


range = SpecialForm("pl.range", "Sequential loop: pl.range(stop) / (start, stop[, step]); "
                    "init_values=(...) makes loop-carried values updated with pl.yield_.")
parallel = SpecialForm("pl.parallel", "Loop whose iterations are independent (runs in order).")
unroll = SpecialForm("pl.unroll", "Compile-time unrolled loop over literal bounds.")
yield_ = SpecialForm("pl.yield_", "Next values of a loop's init_values, bound after the loop.")
while_ = SpecialForm("pl.while_", "for (a, b) in pl.while_(init_values=(a0, b0)): a loop whose "
                     "first statement pl.cond(c) is its condition.")
cond = SpecialForm("pl.cond", "pl.cond(c): the condition of the enclosing pl.while_ loop.")
split_aiv = SpecialForm("pl.split_aiv", "for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE): "
                        "the body runs on each AIV lane of the core.")

# task scopes of orchestration functions (``with`` statements; ``pl.spmd`` also
# as a loop iterator)
at = SpecialForm("pl.at", "with pl.at(level=pl.Level.CORE_GROUP, name_hint=..., deps=[...]) "
                 "as tid: the body runs as one task of the rank's scheduler.")
spmd = SpecialForm("pl.spmd", "with pl.spmd(n) / for i in pl.spmd(n): the body runs as one "
                   "task of n blocks (pl.get_block_idx() is the block index).")
manual_scope = SpecialForm("pl.manual_scope", "with pl.manual_scope(): tasks inside are ordered "
                           "by their explicit deps= only.")
scope = SpecialForm("pl.scope", "with pl.scope(mode=pl.ScopeMode.MANUAL | AUTO): a dependency "
                    "tracking scope.")
TASK_FORMS = (at, spmd, manual_scope, scope)
submit = SpecialForm("pl.submit", "outs..., tid = pl.submit(self.kernel, *args, deps=[...]): "
                     "the kernel call as one task (class form).")
spmd_submit = SpecialForm("pl.spmd_submit", "outs..., tid = pl.spmd_submit(self.kernel, *args, "
                          "core_num=n): the kernel as one task of n blocks (class form).")
SUBMIT_FORMS = (submit, spmd_submit)

# run artefacts: a declaration, read by the compiler (no code is generated)
dump_tag = SpecialForm("pl.dump_tag", "pl.dump_tag(t): tag the tensor t of this function; "
                       "RunConfig(enable_dump_args=1) writes it before and after every task "
                       "and dispatch that takes it.")
