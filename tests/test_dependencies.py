"""Every third-party module camus imports comes from a requirement setup.cfg declares.

A module that only happens to be on the machine (networkx once was, for `camus net`) passes
every test here and fails after the README's install into a fresh virtual environment. So
this walks the source with `ast` (deferred imports inside functions count too), maps each
top-level module to the distributions that provide it (importlib.metadata's
packages_distributions(), from what is installed), and requires one of them to be declared:
in install_requires for the packages camus installs, install_requires or the `test` extra for
tests/ and bench/.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("camus", "compiler", "switch", "shim", "controller", "p4rt", "apps", "pipeline")
# Imports the packages make on purpose without a pip requirement, each guarded where it is used.
OPTIONAL = {
    # Debian's mininet package, for the system Python; controller/emulation.py finds it there.
    "mininet": (),
    # The Kafka half of `camus demo`: apps/cli.py says to install the test extra when it is absent.
    "kafka": ("kafka-python",),
}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(section: str, key: str) -> set[str]:
    """The distribution names of one requirements list of setup.cfg (comments skipped)."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    names = set()
    for line in config[section][key].splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(_normal(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group()))
    return names


def third_party_imports(folders: list[str]) -> dict[str, set[str]]:
    """{top-level module: files importing it} for the modules that are neither the standard
    library, camus's own packages, nor a module beside the importing file (tests' helpers)."""
    found: dict[str, set[str]] = {}
    for path in sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if (top in sys.stdlib_module_names or top in PACKAGES or top in ("tests", "bench")
                        or (path.parent / f"{top}.py").exists() or (path.parent / top).is_dir()):
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def undeclared(folders: list[str], allowed: set[str], optional: dict[str, tuple[str, ...]]) -> list[str]:
    providers = importlib.metadata.packages_distributions()
    problems = []
    for module, files in sorted(third_party_imports(folders).items()):
        if module in optional:
            ok = {_normal(d) for d in optional[module]} <= allowed | declared("options.extras_require", "test")
        else:
            ok = bool({_normal(d) for d in providers.get(module, ())} & allowed)
        if not ok:
            where = ", ".join(sorted(files)[:3])
            problems.append(f"{module} (provided by {sorted(providers.get(module, ())) or 'nothing installed'};"
                            f" imported in {where})")
    return problems


def test_the_packages_import_only_what_install_requires_declares():
    problems = undeclared(list(PACKAGES), declared("options", "install_requires"), OPTIONAL)
    assert not problems, "undeclared in install_requires: " + "; ".join(problems)


def test_tests_and_benchmarks_import_only_declared_requirements():
    allowed = declared("options", "install_requires") | declared("options.extras_require", "test")
    problems = undeclared(["tests", "bench"], allowed, {})
    assert not problems, "undeclared in install_requires or the test extra: " + "; ".join(problems)
