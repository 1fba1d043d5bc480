"""IR and the compile entry point: ``tilecomm.ir.compile(Program, distributed_config=...)``.

``compile`` hands the program to the compiler its decorator attached
(``driver``); the IR package itself stays below the compiler.  The names a
port imports from here (``CompiledProgram``, ``DistributedCompiledProgram``,
``DistributedConfig``) load their module on first use (PEP 562), so reading
the IR never loads the compiler."""

from .._lazy import lazy_names
from ..errors import TilecommError, at_entry_point
from .functions import KernelFunction, ProgramClass

# options of upstream's compile that steer its pass pipeline and the chip
# toolchain (ptoas, the memory planner, IR dumps, the simpler runtime); a CPU
# build has neither, so a ported call may pass them and they change nothing
TOOLCHAIN_OPTIONS = frozenset({
    "strategy", "dump_passes", "backend_type", "skip_ptoas", "verification_level",
    "diagnostic_phase", "disabled_diagnostics", "memory_planner",
    "enable_pypto_l0c_double_buffer", "profiling", "analyze_auto_scopes_for_deps",
    "emit_source_loc", "dump_ptoas_passes", "runtime"})


def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None,
            **toolchain_options):
    """Compile a ``@pl.program`` class or a ``@pl.jit.host`` function.
    ``toolchain_options``: names of ``TOOLCHAIN_OPTIONS`` only (no effect)."""
    unknown = sorted(set(toolchain_options) - TOOLCHAIN_OPTIONS)
    if unknown:
        raise TypeError(f"compile() got unexpected keyword argument(s) {unknown}; besides "
                        f"output_dir, platform, distributed_config and config it accepts "
                        f"upstream's toolchain options {sorted(TOOLCHAIN_OPTIONS)} (no effect "
                        f"on the CPU)")
    driver = getattr(program, "driver", None) \
        if isinstance(program, (KernelFunction, ProgramClass)) else None
    if driver is None:
        raise TypeError(f"tilecomm.ir.compile expects a @pl.program class or a @pl.jit.host "
                        f"function; got {program!r}")
    try:
        return driver.compile(program, output_dir, platform=platform,
                              distributed_config=distributed_config, config=config)
    except TilecommError as e:         # an entry point: the user's frames only
        at_entry_point(e)
        raise


# public name -> the module (relative to this package) that offers it
_HOMES = {
    "CompiledProgram": ".distributed_compiled_program",
    "DistributedCompiledProgram": ".distributed_compiled_program",
    "DistributedConfig": ".distributed_compiled_program",
}


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())


__all__ = ["CompiledProgram", "DistributedCompiledProgram", "DistributedConfig",
           "TOOLCHAIN_OPTIONS", "compile"]
