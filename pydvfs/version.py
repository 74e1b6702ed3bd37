"""What this pydvfs is: the version, `git describe` of the checkout it was built from, and what
decides the clock in it (the built-in policies, one per board and energy measure, with their
data's and generated file's hashes) and how it loads policies.

The lines after the first come from the C extension (govcore/version.c, gc_version_text), so
``pydvfs --version`` and ``govcore --version`` report the same things in the same words.
"""
from __future__ import annotations

from . import __version__


def version_info() -> dict:
    from . import _core

    build = _core.build_info()
    return {"version": __version__, "extension_version": build["version"],
            "git_describe": build["git_describe"], "can_load_policies": build["can_load_policies"],
            "text": build["version_text"]}


def format_version(prog: str, info: dict) -> str:
    git = f" (git {info['git_describe']})" if info["git_describe"] else ""
    lines = [f"{prog} {info['version']}{git}"]
    if info["extension_version"] != info["version"]:
        lines.append(f"warning   the C extension is from pydvfs {info['extension_version']}: "
                     "rebuild it (make ext)")
    return "\n".join(lines) + "\n" + info["text"].rstrip("\n")
