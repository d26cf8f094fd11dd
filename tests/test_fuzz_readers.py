"""2,400 malformed files through the readers: each gives a valid cloud / transform or an
InputError naming the file -- never another exception, a crash or a hang."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import numpy as np
import pytest

from pcreg.errors import InputError
from pcreg.io import read_points, read_transform, write_points

pytestmark = pytest.mark.open3d

N_POINT_FILES = 2000
N_TRANSFORM_FILES = 400
PER_FILE_TIMEOUT_S = 20


def _valid_point_files(tmp: Path, rng: np.random.Generator) -> dict[str, bytes]:
    """One small valid file per format, as bytes."""
    pts = rng.normal(size=(40, 3)).astype(np.float32)
    out: dict[str, bytes] = {}
    write_points(tmp / "a.ply", pts)
    out[".ply"] = (tmp / "a.ply").read_bytes()
    header = "\n".join(
        ["ply", "format ascii 1.0", "element vertex 40", "property float x", "property float y",
         "property float z", "end_header"]
    )  # fmt: skip
    out[".ply-ascii"] = (header + "\n" + "\n".join(" ".join(map(str, p)) for p in pts)).encode()
    pcd_header = (
        "# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
        "WIDTH 40\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 40\n"
    )
    out[".pcd"] = (pcd_header + "DATA binary\n").encode() + pts.tobytes()
    out[".pcd-ascii"] = (
        pcd_header + "DATA ascii\n" + "\n".join(" ".join(map(str, p)) for p in pts)
    ).encode()
    buf = io.BytesIO()
    np.save(buf, pts)
    out[".npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, points=pts)
    out[".npz"] = buf.getvalue()
    out[".bin"] = np.hstack([pts, np.ones((40, 1), np.float32)]).tobytes()
    text = "\n".join(" ".join(f"{v:.5f}" for v in p) for p in pts)
    out[".xyz"] = text.encode()
    out[".txt"] = ("x y z\n" + text).encode()
    out[".csv"] = text.replace(" ", ",").encode()
    try:
        import laspy

        las = laspy.create(point_format=0, file_version="1.2")
        las.header.scales = [0.001] * 3
        las.x, las.y, las.z = pts[:, 0], pts[:, 1], pts[:, 2]
        buf = io.BytesIO()
        las.write(buf)
        out[".las"] = buf.getvalue()
    except Exception:  # laspy missing or unable: the other formats still run
        pass
    return out


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    kind = rng.integers(8)
    if kind == 0:  # truncated
        return data[: int(rng.integers(0, max(1, len(data))))]
    if kind == 1:  # random bytes flipped
        arr = bytearray(data)
        for i in rng.integers(0, len(arr), size=int(rng.integers(1, 20))):
            arr[i] = int(rng.integers(256))
        return bytes(arr)
    if kind == 2:  # random bytes only
        return rng.bytes(int(rng.integers(0, 400)))
    if kind == 3:  # wrong header: the start of another format's file
        return rng.choice([b"ply\nformat binary_big_endian 9.9\n", b"VERSION 0.7\nFIELDS q\n",
                           b"\x93NUMPY\x01\x00", b"PK\x03\x04", b"LASF"]) + data[64:]  # fmt: skip
    if kind == 4:  # NaN / Inf / garbage tokens spliced into text
        token = rng.choice([b"nan", b"inf", b"-inf", b"1e999", b"NaN NaN NaN", b"\xff\xfe", b"--"])
        cut = int(rng.integers(0, len(data) + 1))
        return data[:cut] + b" " + token + b" " + data[cut:]
    if kind == 5:  # a header promising more (or fewer) points than the body has
        return data.replace(b"40", str(int(rng.integers(0, 10**9))).encode(), 1)
    if kind == 6:  # body duplicated / header only
        return data + data if rng.random() < 0.5 else data[: data.find(b"\n") + 1]
    return b""  # empty file


def _check(reader, path: Path):
    def timeout(*_):
        raise TimeoutError(f"{path.name}: reader hung for {PER_FILE_TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(PER_FILE_TIMEOUT_S)
    try:
        return reader(path), None
    except InputError as err:
        return None, err
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_point_readers_survive_malformed_files(tmp_path):
    rng = np.random.default_rng(2026)
    valid = _valid_point_files(tmp_path, rng)
    kinds = sorted(valid)
    outcomes = {"ok": 0, "error": 0}
    for i in range(N_POINT_FILES):
        kind = kinds[i % len(kinds)]
        path = tmp_path / f"f{i:04d}{kind.split('-')[0]}"
        path.write_bytes(_mutate(valid[kind], rng))
        points, err = _check(read_points, path)
        if err is not None:
            assert str(err).startswith(str(path)), str(err)  # the message names the file
            assert "\n" not in str(err)  # one line
            outcomes["error"] += 1
        else:
            assert points.dtype == np.float64 and points.ndim == 2 and points.shape[1] == 3
            assert len(points) >= 1 and np.isfinite(points).all()
            outcomes["ok"] += 1
        path.unlink()
    # the mutations really are malformed most of the time, and some survive intact
    assert outcomes["error"] > N_POINT_FILES // 2 and outcomes["ok"] > 0, outcomes


def test_transform_reader_survives_malformed_files(tmp_path):
    rng = np.random.default_rng(7)
    t = np.eye(4)
    t[:3, 3] = [1.0, 2.0, 3.0]
    buf = io.BytesIO()
    np.save(buf, t)
    valid = {
        ".txt": "\n".join(" ".join(f"{v:.6f}" for v in row) for row in t).encode(),
        ".npy": buf.getvalue(),
        ".json": json.dumps({"transform": t.tolist()}).encode(),
    }
    kinds = sorted(valid)
    errors = 0
    for i in range(N_TRANSFORM_FILES):
        kind = kinds[i % len(kinds)]
        path = tmp_path / f"t{i:04d}{kind}"
        path.write_bytes(_mutate(valid[kind], rng))
        matrix, err = _check(read_transform, path)
        if err is not None:
            assert str(err).startswith(str(path))
            errors += 1
        else:  # whatever parsed is a rigid transform
            assert matrix.shape == (4, 4) and np.isfinite(matrix).all()
            assert np.allclose(matrix[:3, :3] @ matrix[:3, :3].T, np.eye(3), atol=1e-2)
        path.unlink()
    assert errors > N_TRANSFORM_FILES // 2
