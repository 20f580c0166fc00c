"""A plugin file's errors name the file and the class (issue 58, item 7), never the internal module name clbench
imports the file under (`clbench_plugin_file_<stem>_<digest>`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import invoke_fresh

from clbench.approaches.plugins import FILE_MODULE_PREFIX

PLUGIN = '''
from dataclasses import dataclass
import clbench.api as cl

class NotApproach:
    name = "not-approach"

@dataclass
class Params:
    a: int = 1

class BadParams(cl.Approach):
    name = "bad-params"
    hyperparameters_class = Params

class BadName(cl.Approach):
    name = "Bad Name!"
'''


@pytest.mark.parametrize(("name", "named"), [("Missing", "has no class 'Missing'"),
                                             ("NotApproach", "NotApproach in "),
                                             ("BadParams", "Params in "),
                                             ("BadName", "BadName.name")])
def test_a_plugin_file_s_error_names_the_file_not_the_internal_module(tmp_path: Path, name: str, named: str) -> None:
    plugin = tmp_path / "my-plugin.py"
    plugin.write_text(PLUGIN)
    code, output = invoke_fresh("list", "-b", "mnist2", "--no-parameters", "-m", f"{plugin}:{name}")
    assert code == 2 and FILE_MODULE_PREFIX not in output and "<class" not in output, output
    assert named in output and str(plugin) in output
