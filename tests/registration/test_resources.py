"""The memory estimate and cap: sizes parse, a millimetre room is refused at once with the
numbers, the shipped pairs fit, and the shipped footprints match the shipped networks."""

from __future__ import annotations

import re
import time

import pytest

from pcreg.errors import InputError
from pcreg.registration.resources import (
    SHIPPED_FOOTPRINTS,
    MemoryCapError,
    check_memory,
    default_cap,
    estimate_memory,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4G", 4 << 30), ("512M", 512 << 20), ("1.5GiB", 3 << 29), ("2000", 2000), (1e9, 10**9),
     ("8gb", 8 << 30)],
)  # fmt: skip
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-1G", "abc", "4X", "", "nan", "0.5", "1e-3", 0.25])
def test_parse_size_refuses(text):
    """Including sizes under one byte, which truncated to a cap of 0 bytes."""
    with pytest.raises(InputError):
        parse_size(text)


def test_a_small_pair_cap_is_shown_in_its_own_unit(rng):
    room = rng.uniform(0, 4, (20000, 3))
    with pytest.raises(MemoryCapError, match=r"over the 4\.0 MiB cap"):
        check_memory(estimate_memory(room, room, SHIPPED_FOOTPRINTS["indoor"]), 4 << 20)


def test_a_need_just_over_the_cap_does_not_read_as_the_cap(rng):
    """A need a little over its cap printed "needs about 3.0 MiB ..., over the 3.0 MiB cap";
    the two now get the decimals that tell them apart, and the advice names Python's
    argument beside the flag."""
    room = rng.uniform(0, 4, (20000, 3))
    need = estimate_memory(room, room, SHIPPED_FOOTPRINTS["indoor"]).bytes
    with pytest.raises(MemoryCapError) as err:
        check_memory(estimate_memory(room, room, SHIPPED_FOOTPRINTS["indoor"]), need - (20 << 20))
    text = str(err.value)  # about 1.31 GiB over a cap 20 MiB lower: both "1.3 GiB" before
    sizes = re.findall(r"(\d+\.\d+) GiB", text)
    assert len(sizes) == 2 and sizes[0] != sizes[1] and float(sizes[0]) > float(sizes[1]), text
    assert "raise --max-memory / max_memory=" in text


def test_default_cap_at_most_4_gib():
    assert 0 < default_cap() <= 4 << 30


def test_estimate_grows_with_superpoints(rng):
    room = rng.uniform(0, 4, (20000, 3))
    fp = SHIPPED_FOOTPRINTS["indoor"]
    metres = estimate_memory(room, room, fp)
    millimetres = estimate_memory(room * 1000, room * 1000, fp)
    assert max(metres.nsp) <= 1000 and metres.bytes < 2 << 30  # 0.4 m cells of a 4 m cube
    assert max(millimetres.nsp) == 20000  # every point its own superpoint
    assert millimetres.bytes > 100 << 30


def test_millimetre_room_refused_quickly_with_numbers(rng):
    room = rng.uniform(0, 4000, (20000, 3))
    start = time.perf_counter()
    with pytest.raises(MemoryCapError, match=r"needs about \d+\.\d GiB .* superpoints .* cap"):
        check_memory(estimate_memory(room, room, SHIPPED_FOOTPRINTS["outdoor"]), 4 << 30)
    assert time.perf_counter() - start < 5


def test_real_pairs_fit_the_default_cap(shared_data):
    from pcreg.io import read_points

    demo = shared_data / "geotransformer_repo" / "demo"
    src, ref = read_points(demo / "src.npy"), read_points(demo / "ref.npy")
    assert estimate_memory(src, ref, SHIPPED_FOOTPRINTS["indoor"]).bytes < 1 << 30
    kitti = shared_data / "kitti00_scancontext"
    src, ref = read_points(kitti / "000094.bin"), read_points(kitti / "000095.bin")
    assert estimate_memory(src, ref, SHIPPED_FOOTPRINTS["outdoor"]).bytes < 1.5 * (1 << 30)


@pytest.mark.parametrize("name", sorted(SHIPPED_FOOTPRINTS))
def test_shipped_footprints_match_the_networks(name):
    from pcreg.registration.loading import load_network

    config = load_network(name).network.config
    fp = SHIPPED_FOOTPRINTS[name]
    assert (fp.voxel, fp.stages) == (config.voxel_size, config.num_stages)


def test_max_memory_reaches_the_pipeline(rng):
    from pcreg.registration.pipeline import Registration

    room = rng.uniform(0, 4, (5000, 3))
    pipe = Registration("indoor", networks=lambda m, d: pytest.fail("must not load"),
                        max_memory="1K")  # fmt: skip
    with pytest.raises(MemoryCapError, match="cap"):
        pipe(room, room)


def test_scene_too_small_for_the_network_is_refused(rng):
    from pcreg.registration.checks import TooFewPointsError
    from pcreg.registration.pipeline import Registration

    box = rng.uniform(0, 1.0, (20000, 3))  # 1 m: at most 27 cells of 0.4 m, ~8 in practice
    box = box[(box[:, 2] < 0.05) | (box[:, 0] < 0.05)]  # two faces: few occupied cells
    pipe = Registration("indoor", networks=lambda m, d: pytest.fail("must not load"))
    with pytest.raises(TooFewPointsError, match=r"too small for the network: .* superpoints"):
        pipe(box, box)
