"""What this pydvfs is: the version, `git describe` of the checkout it was built from, and the
built-in tree's provenance (training data, its hash, when, and the hash of its C source).

The build facts come from the C extension (govcore/version.c), so ``pydvfs --version`` and
``govcore --version`` report the same things in the same words.
"""
from __future__ import annotations

from . import __version__


def version_info() -> dict:
    from . import _core

    build = _core.build_info()
    tree = _core.Tree(None)
    return {"version": __version__, "extension_version": build["version"],
            "git_describe": build["git_describe"], "tree": tree.name, **tree.provenance,
            "tree_sha256": build["builtin_tree_sha256"], "can_load_policies": build["can_load_policies"]}


def format_version(prog: str, info: dict) -> str:
    git = f" (git {info['git_describe']})" if info["git_describe"] else ""
    lines = [f"{prog} {info['version']}{git}"]
    if info["extension_version"] != info["version"]:
        lines.append(f"warning   the C extension is from pydvfs {info['extension_version']}: "
                     "rebuild it (make ext)")
    lines += [f"tree      {info['tree']}",
              f"data      {info['data_file'] or '?'}"
              + (f" (sha256 {info['data_sha256']})" if info["data_sha256"] else ""),
              f"trained   {info['trained_utc'] or '?'}",
              f"tree hash sha256 {info['tree_sha256'] or '?'} (its policy_tree.c)",
              "build     " + ("dynamic: --model-dir loads a trained policy.so" if info["can_load_policies"]
                              else "static, tree compiled in: no loader, no --model-dir")]
    return "\n".join(lines)
