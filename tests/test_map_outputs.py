"""``pcreg map``'s files (:mod:`pcreg.mapping.outputs`) and command line: poses.txt with a
NaN line for an unplaced scan, the sidecar, the merged map coloured by scan, the picture and
the report; argument and output errors as one line, exit 2, nothing created. The end-to-end
run registers three Stanford bunny views (skipped without ``../shared``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.errors import UnwritableOutputError
from pcreg.mapping.build import MapResult
from pcreg.mapping.edges import Edge
from pcreg.mapping.graph import optimise_graph
from pcreg.mapping.outputs import OUTPUT_NAMES, check_out_dir, write_map
from pcreg.registration.information import COVARIANCE_FLOOR_VOXELS, information_matrix

TRAIN = Path(__file__).resolve().parents[1].parent / "shared" / "train_data"
BUNNY = TRAIN / "stanford_bunny_range_scans"


@pytest.fixture(scope="module")
def mapped():
    """Four generated object views: scans 0, 1 and 3 joined by true edges, scan 2's only
    edge not registered (unplaced)."""
    from pcreg.data.synthetic.objects import object_views

    got = object_views(3, 4)
    clouds = [v.astype(np.float64) for v in got.views]
    voxel = got.size / 60
    edges = []
    for s, r in ((1, 0), (3, 0), (3, 1)):
        t = np.linalg.inv(got.poses[r]) @ got.poses[s]
        info = information_matrix(clouds[s], clouds[r], t, voxel)
        edges.append(Edge(s, r, "pair", t, True, "", 0.5, 0.5, info, voxel))
    edges.append(Edge(2, 1, "pair", np.eye(4), False, "no estimate is trustworthy"))
    graph = optimise_graph(clouds, edges)
    names = [f"view{k}.npy" for k in range(4)]
    result = MapResult(names, graph.poses, graph.placed, graph.reference, graph.unplaced, edges,
                       voxel=voxel)  # fmt: skip
    return clouds, result


def test_the_files_of_a_map(mapped, tmp_path):
    clouds, result = mapped
    out = tmp_path / "map"
    paths = write_map(out, result, clouds)
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_NAMES.values())
    rows = np.loadtxt(paths["poses"])
    assert rows.shape == (4, 12)
    assert np.isnan(rows[2]).all() and np.isfinite(np.delete(rows, 2, axis=0)).all()
    assert np.allclose(rows[0], np.eye(4)[:3].ravel())
    assert np.allclose(rows[3].reshape(3, 4), result.poses[3][:3])
    side = json.loads(paths["sidecar"].read_text())
    # the Python result gives the same record, under a registration result's name for it
    assert json.loads(json.dumps(result.to_dict())) == side
    assert side["frame"] == {"reference": 0, "scan": "view0.npy"}
    assert side["placed"] == [True, True, False, True]
    why = "no candidate edge of this scan registered"
    assert side["unplaced"] == [{"scan": 2, "name": "view2.npy", "reason": why}]
    assert [(e["src"], e["ref"], e["registered"], e["kept"]) for e in side["edges"]] == [
        (1, 0, True, True), (3, 0, True, True), (3, 1, True, True), (2, 1, False, False)
    ]  # fmt: skip
    assert np.asarray(side["edges"][0]["information"]).shape == (6, 6)
    assert side["poses"][2] is None
    import open3d as o3d

    cloud = o3d.io.read_point_cloud(str(paths["map"]))
    colors = np.unique(np.round(np.asarray(cloud.colors), 3), axis=0)
    assert len(colors) == 3  # one per placed scan
    assert 1000 < len(cloud.points) < sum(len(clouds[k]) for k in (0, 1, 3))
    png = paths["png"].read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000
    page = paths["report"].read_text()
    assert "0: view0.npy" in page and "edge kept by the graph (3)" in page
    assert "view2.npy" in page  # the unplaced scan is named in the table
    with pytest.raises(FileExistsError):  # nothing replaced without overwrite
        write_map(out, result, clouds)
    write_map(out, result, clouds, overwrite=True)


def test_an_interrupted_map_writes_none_of_its_files(mapped, tmp_path, monkeypatch):
    """A signal while the map's report is drawn (its last file): poses.txt, the sidecar,
    the map and the picture were on disk already; now none of them is, and the folders the
    map created are gone; a folder that was there stays, with what it held."""
    import signal

    import pcreg.viz.maps as maps
    from pcreg._fs import Terminated

    def interrupted(*args, **kwargs):
        raise Terminated(signal.SIGTERM)

    monkeypatch.setattr(maps, "write_map_report", interrupted)
    clouds, result = mapped
    out = tmp_path / "maps" / "map"
    with pytest.raises(Terminated):
        write_map(out, result, clouds)
    assert list(tmp_path.iterdir()) == []  # neither maps/ nor maps/map left behind
    (tmp_path / "mine").mkdir()  # a folder of the user's, empty, named through a new one
    with pytest.raises(Terminated):
        write_map(tmp_path / "new" / ".." / "mine", result, clouds)
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # "new" is gone, "mine" stays
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(Terminated):
        write_map(out, result, clouds)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def _bunny_views(tmp_path, names=("bun000", "bun045", "bun315")):
    if not (BUNNY / "scans").is_dir():
        pytest.skip(f"{BUNNY} not found")
    meta = json.loads((BUNNY / "pairs.json").read_text())
    truth = {Path(s["file"]).stem: np.asarray(s["T_world_scan"]) for s in meta["scans"]}
    files = []
    for name in names:
        dst = tmp_path / f"{name}.npy"
        dst.write_bytes((BUNNY / "scans" / f"{name}.npy").read_bytes())
        files.append(dst)
    return files, [truth[n] for n in names]


@pytest.mark.parametrize("names", [("bun000", "bun045", "bun315"), ("bun000", "bun045", "bun090")])
def test_pcreg_map_on_three_bunny_views(tmp_path, capsys, names):
    """Three overlapping views (0, 45 and 315 deg; and the README's 0, 45, 90): three pairs
    registered in this process, every view placed within 1 deg and 1 mm of the .conf poses
    (first view aligned), the first view's pose the identity to the bit (the README's views
    left 5e-62 in it before the graph set it)."""
    files, truth = _bunny_views(tmp_path, names)
    out = tmp_path / "map"
    code = main(["map", *map(str, files), "--out", str(out), "--workers", "1"])
    assert code == 0, capsys.readouterr().err
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [str(f) for f in files]
    poses = np.loadtxt(out / "poses.txt").reshape(-1, 3, 4)
    side = json.loads((out / "poses.txt.json").read_text())
    assert all(e["kept"] for e in side["edges"]), side["edges"]
    assert np.array_equal(poses[0], np.eye(4)[:3])  # the world is the first view's frame, exactly
    for k in range(3):
        est = np.vstack([poses[k], [0, 0, 0, 1]])
        gt = np.linalg.inv(truth[0]) @ truth[k]
        err = np.linalg.inv(gt) @ est
        angle = np.degrees(np.arccos(np.clip((np.trace(err[:3, :3]) - 1) / 2, -1, 1)))
        assert angle < 1.0 and np.linalg.norm(err[:3, 3]) < 0.001, (k, angle, err[:3, 3])


def test_argument_and_output_errors_are_one_line_and_create_nothing(tmp_path, capsys):
    scan = tmp_path / "a.npy"
    np.save(scan, np.random.default_rng(0).random((100, 3)))
    out = tmp_path / "out"
    assert main(["map", str(scan), "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pcreg: error: scans: a map needs at least two scans, got 1"]
    assert main(["map", str(tmp_path / "none*.npy"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().endswith("the pattern matches no file")
    assert main(["map", str(scan), str(scan), "--out", str(out), "--workers", "0"]) == 2
    assert "workers: must be at least 1" in capsys.readouterr().err
    out.mkdir()
    (out / "poses.txt").write_text("keep me\n")
    assert main(["map", str(scan), str(scan), "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "poses.txt: already exists" in err[0], err
    assert (out / "poses.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in out.iterdir()) == ["poses.txt"]
    assert not (tmp_path / "other").exists()
    few = tmp_path / "few.npy"
    np.save(few, np.random.default_rng(1).random((10, 3)))
    assert main(["map", str(scan), str(few), "--out", str(tmp_path / "o2"), "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    need = "too few points: 10 given, at least 100 are needed to register"
    assert err == [f"pcreg: error: {few}: {need}"], err
    assert not (tmp_path / "o2").exists()
    (tmp_path / "file").write_text("")
    assert main(["map", str(scan), str(scan), "--out", str(tmp_path / "file")]) == 2
    assert "--out must be a directory" in capsys.readouterr().err


def test_an_out_folder_that_cannot_be_made_is_refused_before_any_work(tmp_path):
    """A symbolic link to nothing (or in a loop) on the way, or a name longer than the file
    system takes, fails mkdir only when the map is written, after every registration: refused
    first, whether the long name is looked up (an existing parent) or not (a missing one)."""
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(UnwritableOutputError, match="symbolic link to nothing"):
        check_out_dir(tmp_path / "gone" / "map")
    with pytest.raises(UnwritableOutputError, match="a loop of symbolic links"):
        check_out_dir(tmp_path / "loop" / "map")
    long = "m" * 300
    for out in (long, f"{long}/map", f"new/{long}", f"new/{long}/map"):
        with pytest.raises(UnwritableOutputError, match=r"File name too long|a name of 300 bytes"):
            check_out_dir(tmp_path / out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gone", "loop"]  # nothing created
    with pytest.raises(UnwritableOutputError, match="gone: is a symbolic link to nothing"):
        check_out_dir(tmp_path / "gone")
    (tmp_path / "file").write_text("")
    with pytest.raises(UnwritableOutputError, match=r"'.*file' is not a directory"):
        check_out_dir(tmp_path / "file" / "map")
    (tmp_path / "file").unlink()
    assert check_out_dir(tmp_path / ("m" * 255) / "new" / ".." / "map")["poses"].name


@pytest.mark.parametrize("workers", [0, -2])
def test_the_python_map_refuses_workers_under_one_as_the_command_does(workers):
    """``pcreg.map(..., workers=0)`` was accepted where ``pcreg map --workers 0`` is not."""
    import pcreg
    from pcreg.errors import InputError

    clouds = [np.random.default_rng(0).random((500, 3)) for _ in range(2)]
    with pytest.raises(InputError, match=f"workers: must be at least 1, got {workers}"):
        pcreg.map(clouds, workers=workers)


def test_a_map_ply_written_short_is_an_error(tmp_path):
    """Open3D reports success on a PLY cut short by a full disk or ``ulimit -f``; the map's
    size check refuses it, naming the output, and passes the whole file."""
    import errno

    import open3d as o3d

    from pcreg.mapping.outputs import _check_ply_size

    rng = np.random.default_rng(0)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(rng.random((500, 3))))
    cloud.colors = o3d.utility.Vector3dVector(rng.random((500, 3)))
    tmp = tmp_path / "t.ply"
    assert o3d.io.write_point_cloud(str(tmp), cloud, write_ascii=False)
    _check_ply_size(tmp, tmp_path / "map.ply", 500)
    with open(tmp, "r+b") as handle:
        handle.truncate(tmp.stat().st_size - 1)
    with pytest.raises(OSError, match="its 500 points take") as err:
        _check_ply_size(tmp, tmp_path / "map.ply", 500)
    assert err.value.errno == errno.EIO and err.value.filename == str(tmp_path / "map.ply")


def test_register_json_carries_the_pose_covariance(tmp_path, capsys):
    """``pcreg register --json``: the information matrix and the calibrated covariance of the
    estimate (rotation in rad then translation, source frame; the object floor of
    ``pcreg.registration.information``); on two overlapping bunny views the standard deviations
    are a small fraction of a degree and about a millimetre (the object floor, 0.12 voxel of
    2.7-3.1 mm, over the correspondences; the views register within about 1 mm of the
    ``.conf`` poses, BENCHMARKS.md "Multiway registration")."""
    files, _ = _bunny_views(tmp_path, ("bun000", "bun045"))
    assert main(["register", str(files[1]), str(files[0]), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    info, cov = np.asarray(record["information"]), np.asarray(record["covariance"], float)
    assert info.shape == cov.shape == (6, 6)
    assert np.allclose(cov, cov.T) and np.all(np.linalg.eigvalsh(cov) > 0)
    scale = (cov @ info)[0, 0]  # sigma^2 + (c voxel)^2 N, m^2
    assert np.allclose(cov @ info, scale * np.eye(6), atol=1e-9 * scale)
    assert record["object"] and "calibrated" in record["covariance_convention"]
    voxel, count = record["voxel_size_m"], info[5, 5]
    assert scale >= (COVARIANCE_FLOOR_VOXELS["object"] * voxel) ** 2 * count
    rot_sd = np.degrees(np.sqrt(np.diag(cov)[:3]))
    trans_sd = np.sqrt(np.diag(cov)[3:])
    assert np.all((rot_sd > 1e-3) & (rot_sd < 0.5)), rot_sd
    assert np.all((trans_sd > 1e-6) & (trans_sd < 2e-3)), trans_sd  # metres: under 2 mm
    assert "rotation in rad" in record["covariance_convention"]


def test_pcreg_map_takes_arrays_in_any_pose(tmp_path):
    """The Python API on three bunny views given as arrays, each moved by a random rigid
    motion: every view placed within 1 deg and 1 mm (at its centroid) of the truth, nothing
    written without ``out``."""
    from scipy.spatial.transform import Rotation

    import pcreg

    files, truth = _bunny_views(tmp_path)
    rng = np.random.default_rng(5)
    clouds, moved_truth = [], []
    for f, t in zip(files, truth, strict=True):
        m = np.eye(4)
        m[:3, :3] = Rotation.random(random_state=rng).as_matrix()
        m[:3, 3] = rng.uniform(-0.3, 0.3, 3)
        clouds.append(np.load(f).astype(np.float64) @ m[:3, :3].T + m[:3, 3])
        moved_truth.append(t @ np.linalg.inv(m))
    result = pcreg.map(clouds, workers=1)
    assert result.names == ["scan 0", "scan 1", "scan 2"] and result.placed.all()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name for f in files]
    for k in range(3):
        gt = np.linalg.inv(moved_truth[0]) @ moved_truth[k]
        err = np.linalg.inv(gt) @ result.poses[k]
        c = clouds[k].mean(axis=0)
        angle = np.degrees(np.arccos(np.clip((np.trace(err[:3, :3]) - 1) / 2, -1, 1)))
        assert angle < 1.0 and np.linalg.norm(err[:3, :3] @ c + err[:3, 3] - c) < 0.001
