"""The README's snippets run as written: its Python blocks, and its command-line block with
the dataset's file name replaced by the spambase file shipped with daskauc (the only change),
so the README cannot drift from the code. Its links point at files that exist."""

import json
import os
import pathlib
import re
import shlex

import pytest

import daskauc
from daskauc.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: the one adaptation: the README's example file -> a small file shipped with daskauc
SUBSTITUTE = {"covtype.libsvm.binary.xz": daskauc.data.default_dataset_path()}


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_readme_python_snippets_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = "\n".join(_blocks("python"))
    assert code.strip()
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert float(re.search(r"^test AUC: ([0-9.]+)", out, re.M).group(1)) > 0.95
    assert float(re.search(r"KernelAUC test AUC: ([0-9.]+)", out).group(1)) > 0.95
    assert (tmp_path / "roc.png").stat().st_size > 10_000


def test_readme_command_line_runs(tmp_path, monkeypatch, capsys, dask_cluster_client):
    """Every line of the command-line block except the setup commands (the two commands,
    which CI runs itself); on the test session's cluster via DASKAUC_SCHEDULER."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DASKAUC_SCHEDULER", dask_cluster_client.scheduler.address)
    lines = [line for block in _blocks("bash") for line in block.splitlines()
             if line.startswith("daskauc ")]
    assert len(lines) >= 4
    for line in lines:
        for old, new in SUBSTITUTE.items():
            line = line.replace(old, new)
        assert main(shlex.split(line)[1:]) == 0, line
    out = capsys.readouterr().out
    assert json.loads(out.strip().splitlines()[-1])["auc"] > 0.95
    assert os.path.getsize(tmp_path / "roc.png") > 10_000
    assert os.path.getsize(tmp_path / "history.png") > 10_000


def test_readme_two_commands_are_ci():
    """The README's test command is the one .ci/run runs."""
    commands = [b.strip() for b in _blocks("bash") if "pip install" in b]
    assert len(commands) == 2 and commands[1].endswith("python -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text()
    # .ci/run makes the venv itself (rm -rf first), then runs the rest of the command
    venv = "python3 -m venv .venv && "
    assert commands[1].startswith(venv) and "python3 -m venv .venv\n" in ci
    assert commands[1][len(venv):] in ci.splitlines()


@pytest.mark.parametrize("target", re.findall(r"\]\(([^)#]+)\)", README))
def test_readme_links_exist(target):
    if target.startswith("http"):
        pytest.skip("external link")
    assert (ROOT / target).exists(), target
