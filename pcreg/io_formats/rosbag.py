"""sensor_msgs/PointCloud2 messages of ROS 1 and ROS 2 bags, through the pure-Python rosbags.

A bag holds many clouds, so one is addressed by topic and message index::

    run.bag#/velodyne_points#3     message 3 (0-based) of topic /velodyne_points
    run.bag#/velodyne_points       its first message (index 0)
    rec#/points#0                  a ROS 2 bag: its folder (metadata.yaml inside), or
    rec/rec_0.mcap#/points#0       one of its storage files (.db3 sqlite3 or .mcap)

ROS names never contain ``#``, so the address is unambiguous. A bag without a topic is refused
with a line that lists its PointCloud2 topics and their message counts.

x, y and z are taken by name from the message's fields (FLOAT32 or FLOAT64, any offset and
``point_step``, either byte order, other fields such as intensity or ring ignored, padding
skipped, rows of ``row_step`` bytes); a message whose sizes disagree with its data is
corrupt. NaN points are returned for :func:`pcreg.io.read_points` to drop and count, and so
are the ``(0, 0, 0)`` points of an organised cloud (``height > 1``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError, InputError
from pcreg.io_formats._common import _AXES, RawCloud, _one_line, check_index, organized_zeros

ROS_FORMATS = (".bag", ".db3", ".mcap")
POINTCLOUD2 = "sensor_msgs/msg/PointCloud2"
#: PointField datatypes pcreg reads x, y, z from
_FLOAT_TYPES = {7: "f4", 8: "f8"}
_TYPE_NAMES = {1: "INT8", 2: "UINT8", 3: "INT16", 4: "UINT16", 5: "INT32", 6: "UINT32",
               7: "FLOAT32", 8: "FLOAT64"}  # fmt: skip


def is_rosbag2_dir(path: Path) -> bool:
    """True for a ROS 2 bag folder (one with a ``metadata.yaml``)."""
    return path.is_dir() and (path / "metadata.yaml").is_file()


def _bag_paths(path: Path) -> list[Path]:
    """The paths rosbags opens for ``path``: a ROS 1 ``.bag`` file, or a ROS 2 bag folder
    (given as the folder or one of its storage files)."""
    if path.suffix.lower() == ".bag":
        return [path]
    folder = path if path.is_dir() else path.parent
    if not is_rosbag2_dir(folder):
        raise InputError(
            path,
            "a ROS 2 bag is read from its folder with metadata.yaml, and there is none "
            f"in {str(folder)!r}",
        )
    return [folder]


def parse_selector(path: Path, selector: str | None) -> tuple[str | None, int]:
    """(topic, message index) of the text after the bag's ``#``: ``/topic`` or
    ``/topic#K``; a topic without its leading ``/`` is taken as if it had one."""
    if selector is None or selector == "":
        return None, 0
    topic, hash_, index = selector.rpartition("#")
    if not hash_:
        topic, index = selector, "0"
    try:
        k = int(index)
    except ValueError:
        raise InputError(
            path, f"'#{index}' is not a message index: address a cloud as {path.name}#/TOPIC#K"
        ) from None
    if not topic:
        raise InputError(
            path, f"no topic before '#{index}': address a cloud as {path.name}#/TOPIC#K"
        )
    return (topic if topic.startswith("/") else "/" + topic), k


def read_rosbag(path: Path, selector: str | None) -> RawCloud:
    """x, y, z of the PointCloud2 message ``selector`` (``/topic`` or ``/topic#K``, K 0-based,
    default 0) of a ROS 1 or ROS 2 bag as ``(N, 3) float64`` in the message's frame, metres."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:  # pragma: no cover - rosbags is a core dependency
        raise ImportError("reading ROS bags needs rosbags: pip install 'rosbags>=0.11'") from exc
    topic, index = parse_selector(path, selector)
    try:
        reader = AnyReader(_bag_paths(path), default_typestore=get_typestore(Stores.LATEST))
        reader.open()
    except InputError:
        raise
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as a ROS bag ({_one_line(exc)})") from exc
    try:
        clouds: dict[str, int] = {}
        for c in reader.connections:
            if c.msgtype == POINTCLOUD2:
                clouds[c.topic] = clouds.get(c.topic, 0) + c.msgcount
        listed = ", ".join(f"{t} ({n})" for t, n in sorted(clouds.items()))
        if topic is None:
            if not clouds:
                raise InputError(path, _no_clouds(reader))
            first = sorted(clouds)[0]
            raise InputError(
                path,
                f"bag holds PointCloud2 messages on {listed}: address one as "
                f"{path.name}#{first}#K (K 0-based, default 0)",
            )
        if topic not in clouds:
            other = next((c.msgtype for c in reader.connections if c.topic == topic), None)
            what = f"is {other}, not PointCloud2" if other else "is not in the bag"
            where = f"PointCloud2 topics: {listed}" if clouds else _no_clouds(reader)
            raise InputError(path, f"topic {topic} {what} ({where})")
        count = clouds[topic]
        check_index(path, index, count, f"message of {topic}", "it holds")
        connections = [c for c in reader.connections if c.topic == topic]
        try:
            for k, (connection, _, rawdata) in enumerate(reader.messages(connections)):
                if k == index:
                    msg = reader.deserialize(rawdata, connection.msgtype)
                    break
            else:
                raise CorruptFileError(
                    path, f"{topic} holds fewer messages than its index declares: truncated"
                )
        except InputError:
            raise
        except Exception as exc:
            raise CorruptFileError(
                path, f"message #{index} of {topic} cannot be read ({_one_line(exc)}): corrupt"
            ) from exc
    finally:
        reader.close()
    raw = decode_pointcloud2(path, msg, f"message #{index} of {topic}")
    raw.content = f"PointCloud2 message #{index} of {count} on {topic}"
    return raw


def _no_clouds(reader) -> str:
    topics = ", ".join(sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections}))
    return f"no PointCloud2 messages in the bag (topics: {topics or 'none'})"


def decode_pointcloud2(path: Path, msg, where: str) -> RawCloud:
    """x, y, z of a deserialised sensor_msgs/PointCloud2 ``msg`` as ``(N, 3) float64``, NaN
    kept, an organised cloud's ``(0, 0, 0)`` points marked; CorruptFileError (naming ``path``
    and ``where``) when its fields or sizes are inconsistent."""
    height, width = int(msg.height), int(msg.width)
    step, row_step = int(msg.point_step), int(msg.row_step)
    data = np.asarray(msg.data, dtype=np.uint8)
    n = height * width
    if n and (row_step < width * step or len(data) < (height - 1) * row_step + width * step):
        raise CorruptFileError(
            path,
            f"{where}: {height} x {width} points of {step} bytes in rows of {row_step} need "
            f"{height * row_step} bytes, the message has {len(data)}: corrupt",
        )
    order = ">" if msg.is_bigendian else "<"
    columns = []
    for axis in _AXES:
        fields = [f for f in msg.fields if f.name == axis]
        if len(fields) != 1:
            names = " ".join(f.name for f in msg.fields)
            raise CorruptFileError(path, f"{where}: fields must name {axis!r} once, got {names!r}")
        field = fields[0]
        code = _FLOAT_TYPES.get(int(field.datatype))
        if code is None:
            kind = _TYPE_NAMES.get(int(field.datatype), str(field.datatype))
            raise CorruptFileError(
                path, f"{where}: field {axis!r} is {kind}; pcreg reads FLOAT32 or FLOAT64"
            )
        if int(field.offset) + np.dtype(code).itemsize > step:
            raise CorruptFileError(
                path, f"{where}: field {axis!r} at offset {field.offset} ends past the "
                f"point_step of {step} bytes: corrupt",
            )  # fmt: skip
        if n == 0:
            columns.append(np.zeros(0))
            continue
        view = np.ndarray((height, width), order + code, data, int(field.offset), (row_step, step))
        columns.append(view.reshape(-1).astype(np.float64))
    xyz = np.stack(columns, axis=1)
    organized = (height, width) if height > 1 else None
    marked = organized_zeros(xyz, height, width)
    return RawCloud(xyz, marked, "(0, 0, 0) points of the organised cloud", organized)
