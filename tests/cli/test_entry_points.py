"""Every console script of pyproject.toml is `transformer.cli.NAME:main`, and runs by name and as `python -m`."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

BIN = Path(sys.executable).parent
PYPROJECT = ROOT / "pyproject.toml"
SCRIPTS = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]


def test_every_console_script_is_a_module_of_cli_named_for_it():
    assert SCRIPTS and all(command.startswith("transformer-") for command in SCRIPTS)
    for command, target in SCRIPTS.items():
        assert target == f"transformer.cli.{command.removeprefix('transformer-')}:main"


def test_console_scripts_leave_torch_datasets_and_matplotlib_to_main():
    """Importing every console script's module (what `--help` and a mistaken setting need) imports none of them."""
    modules = [target.split(":")[0] for target in SCRIPTS.values()]
    code = f"import sys, {', '.join(modules)}; print(sorted({{'torch', 'datasets', 'matplotlib'}} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_help_by_name_and_as_a_module(command):
    module = SCRIPTS[command].split(":")[0]
    by_name, as_module = (
        subprocess.run(argv, capture_output=True, text=True, timeout=120)
        for argv in ([str(BIN / command), "--help"], [sys.executable, "-m", module, "--help"])
    )
    for result in (by_name, as_module):
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.startswith(f"{command}: "), result.stdout[:300]
    assert as_module.stdout == by_name.stdout
