"""One extension, pydvfs._core: a thin Cython layer over the plain C99 sources in govcore/."""
from setuptools import Extension, setup
from Cython.Build import cythonize

GOVCORE_SOURCES = [
    "govcore/sysfs.c",
    "govcore/sysfs_path.c",
    "govcore/sysfs_values.c",
    "govcore/board.c",
    "govcore/clock.c",
    "govcore/policy.c",
    "govcore/policy_tree.c",
    "govcore/sampler.c",
]

core = Extension(
    "pydvfs._core",
    sources=["pydvfs/_core.pyx", *GOVCORE_SOURCES],
    include_dirs=["govcore"],
    extra_compile_args=["-std=c99", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wno-format-truncation"],
    libraries=["pthread", "m", "dl"],
)

setup(ext_modules=cythonize([core], language_level=3, compiler_directives={"embedsignature": True}))
