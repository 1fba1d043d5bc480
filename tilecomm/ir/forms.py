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
