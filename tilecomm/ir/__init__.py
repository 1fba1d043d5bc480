"""IR and the compile entry point: ``tilecomm.ir.compile(Program, distributed_config=...)``."""


def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None):
    from ..runtime.program import compile as _compile
    return _compile(program, output_dir, platform=platform,
                    distributed_config=distributed_config, config=config)


__all__ = ["compile"]
