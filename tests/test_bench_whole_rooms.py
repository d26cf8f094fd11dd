"""The whole-rooms benchmark's cases, criterion and table (``tools/whole_rooms.py``)."""

from __future__ import annotations

import numpy as np

from pcreg.bench.whole_rooms import (
    MAX_RTE_SHARE,
    OTHER_ROOM,
    RoomCase,
    format_table,
    is_right,
    room_cases,
    summarise,
)


def _rec(cls, size, registered, right, seconds):
    return {"cls": cls, "size": size, "registered": registered, "right": right,
            "seconds": seconds}  # fmt: skip


def test_the_table_counts_wrong_registrations_and_times_per_class_and_size():
    recs = [
        _rec("pair", 1.0, True, True, 1.0),
        _rec("pair", 1.0, True, False, 3.0),
        _rec("pair", 1.0, False, True, 2.0),
        _rec("unrelated", 1.0, True, False, 5.0),
        {"cls": "unrelated", "size": 1.5, "error": "InputError: ..."},
    ]
    rows = summarise(recs)
    assert [(r["cls"], r["size"]) for r in rows] == [("pair", 1.0), ("unrelated", 1.0),
                                                     ("unrelated", 1.5), ("all", 0.0)]  # fmt: skip
    assert rows[0] == {"cls": "pair", "size": 1.0, "cases": 3, "registered": 2, "right": 1,
                       "wrong": 1, "refused": 1, "median_s": 2.0, "max_s": 3.0}  # fmt: skip
    assert rows[2]["refused"] == 1 and rows[2]["median_s"] is None
    assert rows[3]["wrong"] == 2 and rows[3]["cases"] == 5
    table = format_table(rows, "cmd")
    assert "| pair | x1 | 3 | 2 | 1 | 1 | 2.00 | 3.00 |" in table, table
    assert "| all | all | 5 | 3 | 1 | 2 | 2.50 | 5.00 |" in table, table


def test_a_pose_is_right_within_the_criterion_and_an_unrelated_case_never_is(rng):
    ref = rng.uniform(0, 10, (100, 3))
    ref[:, 2] = 0.0
    ref[:2] = [[0, 0, 0], [10, 10, 0]]  # a 14.1 m diagonal
    case = RoomCase("a", "pair", 1.0, ref, ref, np.eye(4))
    near = np.eye(4)
    near[0, 3] = 0.9 * MAX_RTE_SHARE * np.sqrt(200)
    assert is_right(case, near)
    near[0, 3] = 1.1 * MAX_RTE_SHARE * np.sqrt(200)
    assert not is_right(case, near)
    turned = np.eye(4)
    turned[:2, :2] = [[0, -1], [1, 0]]
    assert not is_right(case, turned)
    assert not is_right(RoomCase("b", "unrelated", 1.0, ref, ref, None), np.eye(4))


def test_room_cases_are_a_rooms_two_stations_and_another_rooms():
    cases = list(room_cases(4104, 1))
    assert [(c.cls, c.size) for c in cases] == [("pair", 1.0), ("unrelated", 1.0),
                                                ("pair", 1.5), ("unrelated", 1.5)]  # fmt: skip
    assert cases[1].name == f"room-4104/{4104 + OTHER_ROOM} x1"
    np.testing.assert_array_equal(cases[0].src, cases[1].src)  # the same first station
    assert not np.array_equal(cases[0].ref, cases[1].ref) and cases[1].gt is None
    # the truth lays the first station on the second: most of it within 5 cm
    from scipy.spatial import cKDTree

    pair = cases[2]
    moved = pair.src @ pair.gt[:3, :3].T + pair.gt[:3, 3]
    dist, _ = cKDTree(pair.ref).query(moved[::50])
    assert (dist < 0.05).mean() > 0.7
