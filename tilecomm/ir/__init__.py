"""IR and the compile entry point: ``tilecomm.ir.compile(Program, distributed_config=...)``.

``compile`` hands the program to the compiler its decorator attached
(``driver``); the IR package itself stays below the compiler."""
from .functions import KernelFunction, ProgramClass


def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None):
    """Compile a ``@pl.program`` class or a ``@pl.jit.host`` function."""
    driver = getattr(program, "driver", None) \
        if isinstance(program, (KernelFunction, ProgramClass)) else None
    if driver is None:
        raise TypeError(f"tilecomm.ir.compile expects a @pl.program class or a @pl.jit.host "
                        f"function; got {program!r}")
    return driver.compile(program, output_dir, platform=platform,
                          distributed_config=distributed_config, config=config)


__all__ = ["compile"]
