"""PointCloud2 messages of ROS 1 and ROS 2 bags (sqlite3 and mcap), written here with rosbags'
own writers: addressed as ``BAG#/TOPIC#K``, x, y, z decoded by field name for float32 and
float64, either byte order, any point_step and row padding, NaN (and an organised cloud's
(0, 0, 0)) dropped and counted; a bag without a topic, a topic of another type or a message
index out of range is one clean line."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg import io
from pcreg.errors import CorruptFileError, InputError, NonFiniteError

rosbags = pytest.importorskip("rosbags")
from rosbags.rosbag1 import Writer as Writer1  # noqa: E402
from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from rosbags.rosbag2 import Writer as Writer2  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

PC2 = "sensor_msgs/msg/PointCloud2"
FLOAT32, FLOAT64, UINT16, INT16 = 7, 8, 4, 3


def lidar_scan(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xyz = rng.uniform(-30, 30, (n, 3))
    xyz[rng.random(n) < 0.05] = np.nan  # no return
    return xyz


def pointcloud2(ts, xyz, *, code="f4", big=False, height=1, row_pad=0, xtype=None):
    """A PointCloud2 of ``xyz (height*width, 3)``: fields x, y, z (``code``), intensity
    float32 and ring uint16 between them and 6 bytes of padding at the end of each point,
    rows padded by ``row_pad`` bytes."""
    order = ">" if big else "<"
    size = np.dtype(code).itemsize
    layout = {"intensity": (0, "f4"), "x": (4, code), "ring": (4 + size, "u2"),
              "y": (6 + size, code), "z": (6 + 2 * size, code)}  # fmt: skip
    step = 6 + 3 * size + 6
    width = len(xyz) // height
    dtype = np.dtype({"names": list(layout), "formats": [order + c for _, c in layout.values()],
                      "offsets": [o for o, _ in layout.values()], "itemsize": step})  # fmt: skip
    table = np.zeros(len(xyz), dtype)
    table["x"], table["y"], table["z"] = xyz.T
    table["intensity"] = np.arange(len(xyz))
    table["ring"] = np.arange(len(xyz)) % 16
    rows = table.tobytes()
    row_step = width * step + row_pad
    data = b"".join(rows[r * width * step : (r + 1) * width * step] + b"\xab" * row_pad
                    for r in range(height))  # fmt: skip
    Field = ts.types["sensor_msgs/msg/PointField"]
    datatype = {"f4": FLOAT32, "f8": FLOAT64}[code] if xtype is None else xtype
    types = {"intensity": FLOAT32, "ring": UINT16}
    fields = [Field(name=k, offset=o, datatype=types.get(k, datatype), count=1)
              for k, (o, _) in layout.items()]  # fmt: skip
    header = header_msg(ts)
    return ts.types[PC2](header=header, height=height, width=width, fields=fields,
                         is_bigendian=big, point_step=step, row_step=row_step,
                         data=np.frombuffer(data, np.uint8), is_dense=False)  # fmt: skip


def header_msg(ts):
    Time = ts.types["builtin_interfaces/msg/Time"]
    Header = ts.types["std_msgs/msg/Header"]
    fields = Header.__dataclass_fields__
    kw = {"seq": 0} if "seq" in fields else {}
    return Header(stamp=Time(sec=1, nanosec=0), frame_id="velodyne", **kw)


def write_bag(path, ros: int, messages, storage=StoragePlugin.SQLITE3) -> None:
    """``messages``: list of (topic, msgtype, message)."""
    ts = typestore(ros)
    if ros == 1:
        writer = Writer1(path)
        serialize = ts.serialize_ros1
    else:
        writer = Writer2(path, version=9, storage_plugin=storage)
        serialize = ts.serialize_cdr
    with writer:
        connections = {}
        for i, (topic, msgtype, msg) in enumerate(messages):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=ts)
            writer.write(connections[topic], 1000 + i, serialize(msg, msgtype))


def typestore(ros: int):
    return get_typestore(Stores.ROS1_NOETIC if ros == 1 else Stores.ROS2_HUMBLE)


def string_msg(ts, text):
    return ts.types["std_msgs/msg/String"](data=text)


SCANS = [lidar_scan(3000, seed) for seed in range(3)]


def recording(ros: int, **kw):
    ts = typestore(ros)
    msgs = [("/chatter", "std_msgs/msg/String", string_msg(ts, "hello"))]
    msgs += [("/velodyne_points", PC2, pointcloud2(ts, xyz, **kw)) for xyz in SCANS]
    return msgs


@pytest.fixture(params=["ros1", "ros2-sqlite3", "ros2-mcap"])
def bag(request, tmp_path):
    """(address of the bag, how it was written) for each kind of bag, little-endian float32."""
    if request.param == "ros1":
        path = tmp_path / "run.bag"
        write_bag(path, 1, recording(1))
    else:
        path = tmp_path / "rec"
        storage = StoragePlugin.MCAP if request.param.endswith("mcap") else StoragePlugin.SQLITE3
        write_bag(path, 2, recording(2), storage)
    return path


def finite(xyz):
    return xyz[np.isfinite(xyz).all(axis=1)]


def test_each_message_of_a_topic(bag):
    for k, xyz in enumerate(SCANS):
        points, info = io.read_points(f"{bag}#/velodyne_points#{k}", return_info=True)
        np.testing.assert_array_equal(points, finite(xyz.astype(np.float32).astype(np.float64)))
        assert info.dropped_invalid == np.isnan(xyz).any(axis=1).sum()
        assert info.content == f"PointCloud2 message #{k} of 3 on /velodyne_points"
    first = io.read_points(f"{bag}#/velodyne_points#0")
    np.testing.assert_array_equal(io.read_points(f"{bag}#/velodyne_points"), first)
    np.testing.assert_array_equal(io.read_points(f"{bag}#velodyne_points"), first)


def test_a_ros2_storage_file_addresses_its_bag(tmp_path):
    for storage, ext in ((StoragePlugin.SQLITE3, "db3"), (StoragePlugin.MCAP, "mcap")):
        path = tmp_path / ext
        write_bag(path, 2, recording(2), storage)
        (file,) = path.glob(f"*.{ext}")
        points = io.read_points(f"{file}#/velodyne_points#2")
        np.testing.assert_array_equal(points, finite(SCANS[2].astype(np.float32)))


@pytest.mark.parametrize("ros", [1, 2])
@pytest.mark.parametrize("big", [False, True], ids=["little", "big"])
def test_float64_either_byte_order(tmp_path, ros, big):
    path = tmp_path / ("f.bag" if ros == 1 else "f")
    write_bag(path, ros, recording(ros, code="f8", big=big))
    points = io.read_points(f"{path}#/velodyne_points#1", nan_policy="drop")
    np.testing.assert_array_equal(points, finite(SCANS[1]))


@pytest.mark.parametrize("ros", [1, 2])
def test_organised_cloud_with_row_padding(tmp_path, ros):
    ts = typestore(ros)
    xyz = SCANS[0].copy()
    xyz[::11] = 0.0  # no return, as some drivers write it
    msg = pointcloud2(ts, xyz, height=6, row_pad=12)
    path = tmp_path / ("o.bag" if ros == 1 else "o")
    write_bag(path, ros, [("/points", PC2, msg)])
    points, info = io.read_points(f"{path}#/points", return_info=True)
    keep = np.isfinite(xyz).all(axis=1) & (xyz != 0).any(axis=1)
    np.testing.assert_array_equal(points, xyz[keep].astype(np.float32))
    nan = np.isnan(xyz).any(axis=1).sum()
    assert info.organized == (6, 500) and info.dropped_marked == (~keep).sum() - nan
    with pytest.raises(NonFiniteError, match=r"\(0, 0, 0\) points of the organised cloud"):
        io.read_points(f"{path}#/points", nan_policy="error")


def test_a_bag_needs_a_topic(bag):
    with pytest.raises(InputError) as err:
        io.read_points(bag)
    assert str(err.value) == (
        f"{bag}: bag holds PointCloud2 messages on /velodyne_points (3): address one as "
        f"{bag.name}#/velodyne_points#K (K 0-based, default 0)"
    )


def test_bad_addresses_are_one_line(bag):
    cases = {
        "#/velodyne_points#3": "message #3 of /velodyne_points does not exist: it holds 3 "
        "messages (#0 to #2, 0-based)",
        "#/velodyne_points#-1": "message #-1 of /velodyne_points does not exist",
        "#/chatter": "topic /chatter is std_msgs/msg/String, not PointCloud2 "
        "(PointCloud2 topics: /velodyne_points (3))",
        "#/nope#0": "topic /nope is not in the bag",
        "#/velodyne_points#last": "'#last' is not a message index",
    }
    for selector, problem in cases.items():
        with pytest.raises(InputError) as err:
            io.read_points(f"{bag}{selector}")
        message = str(err.value)
        assert message.startswith(f"{bag}: {problem}") and "\n" not in message, message


def test_inconsistent_messages_are_corrupt(tmp_path):
    ts = typestore(2)
    short = pointcloud2(ts, SCANS[0])
    short.data = short.data[:-100]
    ints = pointcloud2(ts, SCANS[0], xtype=INT16)
    path = tmp_path / "bad"
    write_bag(path, 2, [("/short", PC2, short), ("/ints", PC2, ints)])
    with pytest.raises(CorruptFileError, match="message #0 of /short: 1 x 3000 points"):
        io.read_points(f"{path}#/short")
    with pytest.raises(CorruptFileError, match="field 'x' is INT16; pcreg reads FLOAT32"):
        io.read_points(f"{path}#/ints")
    (tmp_path / "junk.bag").write_bytes(b"#ROSBAG V2.0\n" + bytes(range(256)) * 4)
    with pytest.raises(CorruptFileError, match=r"junk\.bag: cannot be read as a ROS bag"):
        io.read_points(f"{tmp_path / 'junk.bag'}#/points")
