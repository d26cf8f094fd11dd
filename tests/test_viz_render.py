"""Headless rendering (pcreg.viz.render) leaves the caller's process as it found it: the same
``os.environ`` and no ``pcreg-xdg-*`` runtime directory behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from pcreg._fs import _host_tag
from pcreg.viz.panels import save_alignment_png
from pcreg.viz.render import render_clouds

pytestmark = pytest.mark.open3d


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch):
    """tempfile's directory is ``tmp_path/tmp`` (and XDG_RUNTIME_DIR unset) for the test."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return tmp


def test_render_leaves_environ_and_no_runtime_dir(private_tmpdir, rng, tmp_path):
    points = rng.normal(size=(500, 3))
    before = dict(os.environ)
    image = render_clouds([(points, (1.0, 0.0, 0.0))], width=160, height=120)
    assert image.shape == (120, 160, 3) and (image < 250).any()  # drew something
    assert dict(os.environ) == before
    assert list(private_tmpdir.iterdir()) == []
    # a whole PNG, and with XDG_RUNTIME_DIR set by the caller: that one is kept as it is
    os.environ["XDG_RUNTIME_DIR"] = str(tmp_path)
    before = dict(os.environ)
    save_alignment_png(tmp_path / "a.png", points, points + 0.1, np.eye(4))
    assert dict(os.environ) == before and (tmp_path / "a.png").stat().st_size > 1000
    assert list(private_tmpdir.iterdir()) == []


def test_render_removes_runtime_dirs_of_dead_renderers(private_tmpdir, rng):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = private_tmpdir / f"pcreg-xdg-{dead.pid}-{_host_tag()}-abcd1234"
    live = private_tmpdir / f"pcreg-xdg-{os.getpid()}-{_host_tag()}-abcd1234"
    foreign = private_tmpdir / f"pcreg-xdg-{dead.pid}-0badf00d-abcd1234"
    for path in (stale, live, foreign):
        path.mkdir()
    render_clouds([(rng.normal(size=(100, 3)), (0.0, 0.0, 1.0))], width=64, height=48)
    assert sorted(private_tmpdir.iterdir()) == sorted([live, foreign])
