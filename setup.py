# The native core (cross-process atomics, futex sleep/wake, typed atomic-add
# loops) is a small CPython extension compiled by `pip install`.
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tilecomm._native_core",
            sources=["tilecomm/_native/native_core.c"],
            extra_compile_args=["-O2", "-std=gnu11"],
        )
    ]
)
