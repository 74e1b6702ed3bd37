"""One extension, pydvfs._core: a thin Cython layer over the plain C99 sources in govcore/.

The C sources and warning flags come from govcore/sources.txt and govcore/warnings.txt, which
govcore/Makefile reads too; the version defines are computed as the Makefile computes them.
govcore's headers also ship inside the package (pydvfs/_govcore_include), because `pydvfs
train` compiles a trained tree against them on an installed (non-editable) pydvfs.
"""
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import setuptools
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
GOVCORE = HERE / "govcore"
HEADERS_PACKAGE_DIR = "pydvfs/_govcore_include"


def lines_of(name: str) -> list:
    text = (GOVCORE / name).read_text().splitlines()
    return [t.strip() for t in text if t.strip() and not t.strip().startswith("#")]


def version() -> str:
    return re.search(r'^__version__ = "(.*)"$', (HERE / "pydvfs" / "__init__.py").read_text(), re.MULTILINE)[1]


def git_describe() -> str:
    """`git describe` of the checkout this is built from; "" for an unpacked sdist."""
    if not (HERE / ".git").exists():
        return ""
    try:
        out = subprocess.run(["git", "-C", str(HERE), "describe", "--tags", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def describe_stamp(text: str) -> str:
    """A file that changes only when the version or `git describe` does: listed in the
    extension's depends, so that a new commit rebuilds (and --version tells the truth)."""
    path = HERE / "build" / "describe.setup"
    path.parent.mkdir(exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return str(path.relative_to(HERE))


def c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class build_py_with_headers(build_py):
    """Also copy govcore/*.h into the built package (pydvfs/_govcore_include/)."""

    def run(self):
        super().run()
        dest = Path(self.build_lib) / HEADERS_PACKAGE_DIR
        dest.mkdir(parents=True, exist_ok=True)
        for h in sorted(GOVCORE.glob("*.h")):
            shutil.copy2(h, dest / h.name)


VERSION, GIT_DESCRIBE = version(), git_describe()
core = Extension(
    "pydvfs._core",
    sources=["pydvfs/_core.pyx", *(f"govcore/{s}" for s in lines_of("sources.txt"))],
    include_dirs=["govcore"],
    depends=[describe_stamp(f"{VERSION} {GIT_DESCRIBE}\n"), "govcore/sources.txt", "govcore/warnings.txt",
             *(str(p.relative_to(HERE)) for p in sorted(GOVCORE.glob("*.h")))],
    define_macros=[
        ("GC_VERSION", c_string(VERSION)),
        ("GC_GIT_DESCRIBE", c_string(GIT_DESCRIBE)),
        ("GC_TREE_SHA256", c_string(hashlib.sha256((GOVCORE / "policy_tree.c").read_bytes()).hexdigest())),
        ("GC_POLICIES_SHA256", c_string(hashlib.sha256((GOVCORE / "gen_policies_builtin.c").read_bytes()).hexdigest())),
        ("GC_RANGES_SHA256", c_string(hashlib.sha256((GOVCORE / "gen_policy_ranges.c").read_bytes()).hexdigest())),
    ],
    extra_compile_args=["-std=c99", "-D_GNU_SOURCE", "-O2", *lines_of("warnings.txt")],
    libraries=["pthread", "m", "dl"],
)

# Apache-2.0: a PEP 639 License-Expression where setuptools writes one (77+, Python 3.9+), the
# plain License field on Python 3.8's last setuptools (75.3; JetPack 5).
LICENSE = ({"license_expression": "Apache-2.0"} if int(setuptools.__version__.split(".")[0]) >= 77
           else {"license": "Apache-2.0"})

setup(
    **LICENSE,
    license_files=["LICENSE"],
    ext_modules=cythonize([core], language_level=3, compiler_directives={"embedsignature": True}),
    cmdclass={"build_py": build_py_with_headers},
)
