"""Files that ship inside the package (real measurements, bundled datasets), found through
``importlib.resources``: the same call works in a checkout, an editable install and a wheel."""
from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path


def package_file(*parts: str) -> Path:
    """A file or folder of the pydvfs package, e.g. ``package_file("data", "real")``.

    pydvfs is installed as plain files (never zipped), so the resource is a real path that
    other programs (the verbs run by the demo) can open."""
    if sys.version_info < (3, 9):  # no importlib.resources.files on JetPack 5's Python 3.8
        return Path(__file__).resolve().parent.joinpath(*parts)
    return Path(str(resources.files("pydvfs").joinpath(*parts)))
