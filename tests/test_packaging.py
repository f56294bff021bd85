"""An installed rlft (a wheel, not the checkout) carries what it reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_ships_its_data_and_trains_experts_with_the_tuned_settings(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path / "dist"), str(REPO)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("rlft-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("rlft/py.typed", "rlft/sources/zoo/ppo.yaml", "rlft/sources/zoo/trpo.yaml",
                 "rlft/datasets/templates/offline_rl.md"):
        assert name in names, name
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    # a fresh interpreter that imports the installed copy, not the checkout (which is not on its path)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import rlft; "
             "from rlft.sources.hyperparams import load_hyperparams as h; hp = h('ppo', 'CartPole-v1'); "
             "print(rlft.__file__); print(hp.source); print(hp.raw['n_steps'])")
    out = subprocess.run([sys.executable, "-I", "-c", probe, str(target)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    where, source, n_steps = out.stdout.split()
    assert where.startswith(str(target)) and source == "rlft/sources/zoo/ppo.yaml" and n_steps == "32"


def test_optional_parts_missing_are_one_line_install_hints(cli, tmp_path, monkeypatch):
    """jax (collect) and MuJoCo are extras: without them the commands that need them say which extra to install."""
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "jax", None)
    result = cli("data", "collect", "--env", "CartPole-v1", "--policy", "random", "--episodes", "1",
                 "--dataset-id", "test/nojax-v0")
    assert result.exit_code == 2 and 'pip install "rlft[collect]"' in result.output
    monkeypatch.delitem(sys.modules, "jax")

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mujoco" else real(name, *a))
    result = cli("eval", "--env", "HalfCheetah-v5", "--policy", "random", "--episodes", "1")
    assert result.exit_code == 2 and 'pip install "rlft[mujoco]"' in result.output
    assert "Traceback" not in result.output
