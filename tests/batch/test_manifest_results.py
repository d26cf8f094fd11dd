"""Manifests (CSV / JSON Lines, ids, ground truth) and the append-only results log."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pcreg.batch.manifest import dataset_manifest, read_manifest, write_manifest
from pcreg.batch.results import ResultsLog, format_summary, summarise
from pcreg.cli import main
from pcreg.errors import InputError


def test_csv_and_jsonl_manifests_read_the_same_pairs(tmp_path):
    gt = np.eye(4)
    gt[:3, 3] = [1.0, 2.0, 3.0]
    np.savetxt(tmp_path / "gt.txt", gt)
    (tmp_path / "m.csv").write_text("src,ref,gt\na.ply,b.ply,gt.txt\nc.ply,/abs/d.ply,\n")
    rows = [
        {"src": "a.ply", "ref": "b.ply", "gt": gt.reshape(16).tolist()},
        {"id": "second", "src": "c.ply", "ref": "/abs/d.ply", "gt": gt.tolist()},
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_pairs, jsonl = read_manifest(tmp_path / "m.csv"), read_manifest(tmp_path / "m.jsonl")
    assert (
        [p.src for p in csv_pairs]
        == [p.src for p in jsonl]
        == [str(tmp_path / "a.ply"), str(tmp_path / "c.ply")]
    )
    assert csv_pairs[1].ref == "/abs/d.ply" and csv_pairs[1].gt is None
    assert csv_pairs[0].id == "a.ply -> b.ply" and jsonl[1].id == "second"
    np.testing.assert_array_equal(csv_pairs[0].gt, gt)
    np.testing.assert_array_equal(jsonl[1].gt, gt)
    out = write_manifest(jsonl, tmp_path / "again.jsonl")
    assert [(p.id, p.src) for p in read_manifest(out)] == [(p.id, p.src) for p in jsonl]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"src": "a.ply"}\n', "needs 'src' and 'ref'"),
        ('{"src": "a", "ref": "b", "gt": [1, 2]}\n', "16 numbers"),
        ('{"src": "a", "ref": "b"}\n{"src": "a", "ref": "b"}\n', "appears twice"),
        ("not json\n", "line 1 is not JSON"),
    ],
)
def test_bad_manifests_are_refused_with_the_row(tmp_path, text, message):
    (tmp_path / "m.jsonl").write_text(text)
    with pytest.raises(InputError, match=message):
        read_manifest(tmp_path / "m.jsonl")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("src,ref,src\na.ply,b.ply,c.ply\n", "the header names 'src' twice"),
        ("src,ref\na.ply,b.ply,c.ply\n", "row 1: has more fields than the header names"),
    ],
)
def test_a_csv_whose_columns_are_unclear_is_refused(tmp_path, text, message):
    """Two columns of one name (the reader kept the last: the run failed on the wrong file)
    or a row longer than the header (its extra fields were dropped without a word) are
    refused; a trailing comma is not a field."""
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(InputError, match=message):
        read_manifest(tmp_path / "m.csv")
    (tmp_path / "ok.csv").write_text("src,ref\na.ply,b.ply,\n")
    assert [(p.src, p.ref) for p in read_manifest(tmp_path / "ok.csv")] == [
        (str(tmp_path / "a.ply"), str(tmp_path / "b.ply"))
    ]


def test_a_3dmatch_layout_dataset_becomes_a_manifest(tmp_path):
    from pcreg.data.synthetic.writer import write_indoor_dataset
    from pcreg.data.threedmatch import ThreeDMatchPairs

    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    pairs = dataset_manifest(tmp_path / "ds", "threedmatch", "val")
    ds = ThreeDMatchPairs(tmp_path / "ds", "val")
    assert len(pairs) == len(ds) > 0
    src, ref, t, _ = ds[0]
    from pcreg.io import read_points

    np.testing.assert_array_equal(read_points(pairs[0].src), src)
    np.testing.assert_array_equal(read_points(pairs[0].ref), ref)
    np.testing.assert_allclose(pairs[0].gt, t)


def test_the_results_log_survives_a_line_cut_short(tmp_path):
    """A writer killed mid-line leaves a partial last line: it is dropped, never parsed, and
    the next line starts clean; complete lines are kept and their ids count as done."""
    path = tmp_path / "results.jsonl"
    with ResultsLog(path) as log:
        log.append({"id": "a", "status": "ok", "registered": True, "time_s": 1.0})
        log.append({"id": "b", "status": "failed", "error": "x"})
    with path.open("ab") as f:
        f.write(b'{"id": "c", "status": "o')  # SIGKILL in the middle of a write
    with ResultsLog(path) as log:
        assert [r["id"] for r in log.rows] == ["a", "b"]  # the partial "c" is gone
        assert log.done == {"a"}  # "b" failed: tried again on resume
        log.append({"id": "c", "status": "ok", "registered": False, "time_s": 3.0})
    lines = path.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a", "b", "c"]
    summary = summarise([json.loads(x) for x in lines])
    assert (summary["pairs"], summary["ok"], summary["failed"], summary["registered"]) == (
        3,
        2,
        1,
        1,
    )
    assert summary["median_time_s"] == 2.0 and summary["with_gt"] == 0
    assert "| registered | 1 of 2 |" in format_summary(summary)
    assert "| failed | 1 |" in format_summary(summary)
    every_failed = format_summary(summarise([json.loads(lines[1])]))
    assert "| registered | none: no pair ran to a result |" in every_failed  # not "0 of 0"
    assert summary["first_error"] == "b: x"  # what pcreg batch's exit-4 line quotes
    assert summarise([json.loads(lines[0])])["first_error"] is None


def test_success_follows_each_setting_protocol():
    rows = [
        {
            "id": "1",
            "status": "ok",
            "setting": "indoor",
            "rre_deg": 9.0,
            "rte_m": 0.5,
            "rmse_m": 0.19,
        },
        {
            "id": "2",
            "status": "ok",
            "setting": "indoor",
            "rre_deg": 1.0,
            "rte_m": 0.1,
            "rmse_m": 0.21,
        },
        {
            "id": "3",
            "status": "ok",
            "setting": "outdoor",
            "rre_deg": 4.9,
            "rte_m": 1.9,
            "rmse_m": 9,
        },
        {
            "id": "4",
            "status": "ok",
            "setting": "outdoor",
            "rre_deg": 5.1,
            "rte_m": 0.1,
            "rmse_m": 0,
        },
    ]
    s = summarise(rows)
    assert (s["with_gt"], s["success"]) == (4, 2)  # rows 1 and 3


def test_a_failed_pair_is_tried_again_and_its_latest_row_counts(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultsLog(path) as log:
        log.append({"id": "a", "status": "ok", "registered": True, "time_s": 1.0})
        log.append({"id": "b", "status": "failed", "error": "b.ply: file not found"})
    with ResultsLog(path) as log:
        assert log.done == {"a"}  # b is registered again on resume
        log.append({"id": "b", "status": "ok", "registered": True, "time_s": 3.0})
        latest = list(log.latest().values())
        assert log.done == {"a", "b"}
    s = summarise(latest)
    assert (s["pairs"], s["ok"], s["failed"]) == (2, 2, 0)
    assert summarise([])["median_time_s"] is None  # nothing to take a median of: null in JSON


def test_manifests_that_cannot_be_run_are_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="lists no pairs"):
        read_manifest(tmp_path / "empty.jsonl")
    (tmp_path / "num.jsonl").write_text('{"src": 5, "ref": "b"}\n')
    with pytest.raises(InputError, match="must be paths"):
        read_manifest(tmp_path / "num.jsonl")
    (tmp_path / "latin.csv").write_bytes(b"src,ref\n\xe9.ply,b.ply\n")
    with pytest.raises(InputError, match="not UTF-8"):
        read_manifest(tmp_path / "latin.csv")


def test_manifest_gt_must_be_rigid(tmp_path):
    path = tmp_path / "pairs.jsonl"
    scaled = np.diag([2.0, 2.0, 2.0, 1.0]).reshape(16).tolist()
    path.write_text(json.dumps({"src": "a.ply", "ref": "b.ply", "gt": scaled}) + "\n")
    with pytest.raises(InputError, match="not orthonormal"):
        read_manifest(path)


def test_kitti_manifest_of_a_folder_without_scans(tmp_path):
    with pytest.raises(InputError) as err:
        dataset_manifest(tmp_path, "kitti")
    assert str(err.value) == (
        f"{tmp_path}: no KITTI pairs in split 'test' (sequences 08, 09, 10): none of them has "
        "sequences/NN/velodyne/*.bin; choose another split: --benchmark train or "
        "--benchmark val"
    )
    with pytest.raises(InputError, match="unknown KITTI split 'Bogus': use train"):
        dataset_manifest(tmp_path, "kitti", "Bogus")


def test_kitti_manifest_names_the_default_split_and_the_scans_there_are(tmp_path, capsys):
    """Scans for sequences 00-07 only: the default split, test (08-10), has none. The message
    says so, and how to choose a split that has them."""
    for seq in range(8):
        velo = tmp_path / "sequences" / f"{seq:02d}" / "velodyne"
        velo.mkdir(parents=True)
        np.zeros((10, 4), np.float32).tofile(velo / "000000.bin")
    out = tmp_path / "pairs.jsonl"
    assert main(["manifest", str(tmp_path), "--layout", "kitti", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"pcreg: error: {tmp_path}: no KITTI pairs in split 'test' (sequences 08, 09, 10): "
        "none of them has sequences/NN/velodyne/*.bin; scans exist for sequences 00, 01, 02, "
        "03, 04, 05, 06, 07; choose another split: --benchmark train or --benchmark val"
    )
    assert not out.exists()


def test_3dmatch_metadata_without_fragments_is_refused(tmp_path, capsys):
    """Metadata whose fragments are not there: exit 2 naming the first missing file and how
    many are missing, no manifest (it wrote 1623 pairs of absent files, exit 0)."""
    import shutil

    from pcreg.data.synthetic.writer import write_indoor_dataset
    from pcreg.data.threedmatch import ThreeDMatchPairs

    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    records = ThreeDMatchPairs(tmp_path / "ds", "val").records
    clouds = {r.src_path for r in records} | {r.ref_path for r in records}
    shutil.rmtree(tmp_path / "ds" / "data")
    capsys.readouterr()  # the writer's progress
    first = (tmp_path / "ds" / "data" / records[0].src_path).resolve()
    out = tmp_path / "pairs.jsonl"
    assert main(["manifest", str(tmp_path / "ds"), "--benchmark", "val", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"pcreg: error: {first}: not found: {len(clouds)} of the {len(clouds)} clouds the "
        f"{len(records)} pairs of {tmp_path / 'ds'} name are missing (metadata without its "
        "data? 3DMatch fragments go under ROOT/data, KITTI scans under "
        "ROOT/sequences/NN/velodyne)"
    )
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_manifest_saved_with_a_byte_order_mark_is_read(tmp_path, suffix):
    """Spreadsheets save CSV as UTF-8 with a BOM: the first column is still 'src'."""
    text = ("src,ref\na.ply,b.ply\n" if suffix == ".csv"
            else json.dumps({"src": "a.ply", "ref": "b.ply"}) + "\n")  # fmt: skip
    path = tmp_path / f"m{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    pairs = read_manifest(path)
    assert [(p.src, p.ref) for p in pairs] == [(str(tmp_path / "a.ply"), str(tmp_path / "b.ply"))]


@pytest.mark.parametrize(
    ("extra", "words"),
    [(["--workers", "0"], "must be at least 1"), (["--address", "127.0.0.1:9"], "no Ray cluster")],
)
def test_argument_errors_create_nothing(tmp_path, capsys, extra, words):
    """A bad --workers or an --address nothing answers at: one clean line, exit 2, and the
    output directory is not created."""
    from pcreg.cli import main

    (tmp_path / "m.csv").write_text("src,ref\na.ply,b.ply\n")
    out = tmp_path / "out"
    code = main(["batch", str(tmp_path / "m.csv"), "--out", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and words in err[-1] and not out.exists(), err
