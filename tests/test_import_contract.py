"""The import contract in .importlinter: it holds for this tree, and it catches an upward import.

`lint-imports` runs as a child process on an explicit PYTHONPATH, so it analyses this checkout
(or a copy of it), never whatever camus an editable install points at.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"


def _root_packages() -> list[str]:
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return config["importlinter"]["root_packages"].split()


PACKAGES = _root_packages()
# Packages the contract names that issue 12 has not brought in yet: lint-imports cannot even
# build its graph without them ("Could not find package").
MISSING = [p for p in PACKAGES if not (ROOT / p / "__init__.py").is_file()]


def _lint_imports(tree: Path, *args: str) -> subprocess.CompletedProcess:
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which("lint-imports", path=search)
    assert exe, "lint-imports is missing: pip install -e '.[test]' installs import-linter"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([exe, "--config", str(tree / ".importlinter"), "--no-cache", "--no-logo",
                           *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not in the tree yet (issue 12)")
def test_the_tree_keeps_the_contract():
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def _copy_sources(tree: Path) -> None:
    """The product packages' Python files and the contract, nothing built or generated."""
    def not_python(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n in ("__pycache__", "target")
                or (not n.endswith(".py") and not (Path(folder) / n).is_dir())]

    for package in PACKAGES:
        if (ROOT / package).is_dir():
            shutil.copytree(ROOT / package, tree / package, ignore=not_python)
        else:  # not brought in yet (see MISSING): an empty package lets the graph build
            (tree / package).mkdir()
            (tree / package / "__init__.py").touch()
    shutil.copy(CONFIG, tree / ".importlinter")


def test_an_upward_import_breaks_the_layers(tmp_path):
    _copy_sources(tmp_path)
    before = _lint_imports(tmp_path, "--contract", "layers")
    target = tmp_path / "compiler" / "__init__.py"
    line = len(target.read_text().splitlines()) + 1
    with open(target, "a") as fh:
        fh.write("import shim  # the compiler may not know the broker\n")
    after = _lint_imports(tmp_path, "--contract", "layers")
    named = f"compiler -> shim (l.{line})"
    assert named not in before.stdout
    assert after.returncode != 0 and named in after.stdout, after.stdout + after.stderr


def test_the_codec_importing_the_server_breaks_the_contract(tmp_path):
    """shim.protocol is sans-IO: no module of the shim around it, present or added later
    (the contract forbids `shim.*`, not a list). Its record walk's compiled half is
    shim.protocol._native for that reason; shim.protocol.records reached into
    shim.native_kafka before."""
    _copy_sources(tmp_path)
    before = _lint_imports(tmp_path, "--contract", "sans-io-codec")
    assert before.returncode == 0, before.stdout + before.stderr
    (tmp_path / "shim" / "later.py").write_text('"""A server module added after the contract."""\n')
    target = tmp_path / "shim" / "protocol" / "records.py"
    line = len(target.read_text().splitlines()) + 1
    with open(target, "a") as fh:
        fh.write("from shim import later  # the codec may not know the server\n")
    after = _lint_imports(tmp_path, "--contract", "sans-io-codec")
    named = f"shim.protocol.records -> shim.later (l.{line})"
    assert after.returncode != 0 and named in after.stdout, after.stdout + after.stderr


def test_the_target_interface_importing_an_implementation_breaks_the_contract(tmp_path):
    """controller.target is the interface alone; the factory is controller.targets. A
    deferred import of an implementation from the interface (what open_target did there,
    closing a circle of six modules) is refused twice: by the interface's own contract and
    as a cycle, which no ignore line excuses any more."""
    _copy_sources(tmp_path)
    for contract in ("target-interface", "acyclic-modules"):
        before = _lint_imports(tmp_path, "--contract", contract)
        assert before.returncode == 0, contract + before.stdout + before.stderr
    target = tmp_path / "controller" / "target.py"
    line = len(target.read_text().splitlines()) + 4
    with open(target, "a") as fh:
        fh.write("\n\ndef _embedded():\n    from controller.embedded import EmbeddedTarget\n"
                 "    return EmbeddedTarget\n")
    interface = _lint_imports(tmp_path, "--contract", "target-interface")
    assert interface.returncode != 0
    assert f"controller.target -> controller.embedded (l.{line})" in interface.stdout, interface.stdout
    cycle = _lint_imports(tmp_path, "--contract", "acyclic-modules")
    assert cycle.returncode != 0 and ".target -> .embedded" in cycle.stdout, cycle.stdout
