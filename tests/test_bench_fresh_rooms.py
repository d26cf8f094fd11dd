"""The fresh-rooms count of the bare-planes rule (``tools/fresh_rooms.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _tool():
    path = Path(__file__).resolve().parents[1] / "tools" / "fresh_rooms.py"
    spec = importlib.util.spec_from_file_location("tools_fresh_rooms", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rec(cls, registered, right, reason="", congruence=None):
    return {"cls": cls, "registered": registered, "right": right, "reason": reason,
            "congruence": congruence}  # fmt: skip


def test_the_count_puts_the_rules_refusals_back_for_before_and_leaves_congruent_mirrors_out():
    tool = _tool()
    ruled = tool.RULE + " (0.1% of the fitted points ...)"
    recs = [
        _rec("pair", True, True),
        _rec("pair", False, True, ruled),  # a right answer the rule refused
        _rec("pair", False, False, ruled),  # a wrong one it refused
        _rec("pair", True, False),
        _rec("mirror", True, False, congruence=0.5),
        _rec("mirror", True, False, congruence=0.9),  # a rigid answer exists: left out
        {"cls": "pair", "error": "InputError: ..."},
    ]
    rows = {r["cls"]: r for r in tool.summarise(recs)}
    assert rows["pair"] == {"cls": "pair", "cases": 4, "registered": 2, "wrong": 1,
                            "rule_right": 1, "rule_wrong": 1, "registered_before": 4,
                            "wrong_before": 2}  # fmt: skip
    assert rows["mirror"]["cases"] == 1 and rows["mirror"]["wrong"] == 1
    assert rows["all"]["registered"] == 3 and rows["all"]["wrong_before"] == 3
    table = tool.format_table(tool.summarise(recs), "cmd")
    assert "| all | 5 | 5 / 3 | 3 / 2 | 40.0 % / 33.3 % | 1 |" in table, table


def test_fresh_rooms_are_the_sets_classes_on_other_seeds():
    """The cases of seed 3,000,950 (one room: its first pair's seven classes, then the next
    pair's), as the rule's fresh-seed check drew them."""
    from pcreg.bench.verdict_set import fresh_room_cases

    cases = list(fresh_room_cases(3_000_950, 1))
    assert cases[0].name == "room-3000950 3<-7"
    assert [c.cls for c in cases[:7]] == ["pair", "units", "chunk", "sparse", "mirror",
                                          "disjoint", "unrelated"]  # fmt: skip


def test_a_line_cut_short_is_left_out_and_the_next_record_starts_a_line(tmp_path):
    from pcreg.bench.records import load_records

    path = tmp_path / "out.jsonl"
    path.write_text('{"name": "a", "cls": "pair"}\n{"name": "b", "cl')
    assert [r["name"] for r in load_records(path)] == ["a"]
    assert path.read_text().endswith("\n")
    assert load_records(tmp_path / "none.jsonl") == []


def test_a_room_run_resumes_its_own_file_and_refuses_another_first(tmp_path, capsys):
    """The room tools' arguments (``tools/fresh_rooms.py``, ``tools/whole_rooms.py``): the
    records already in OUT come back; a file of another ``--first`` is refused, exit 2."""
    import pytest

    from pcreg.bench.records import room_run

    path = tmp_path / "out.jsonl"
    path.write_text('{"first": 7, "name": "a"}\n')
    args, done = room_run("Rooms.\n", 7, 3, [str(path), "--table-only"])
    assert (args.first, args.rooms, args.table_only) == (7, 3, True)
    assert done == [{"first": 7, "name": "a"}]
    with pytest.raises(SystemExit) as stop:
        room_run("Rooms.\n", 7, 3, [str(path), "--first", "8"])
    assert stop.value.code == 2
    assert "holds cases of --first [7], not 8" in capsys.readouterr().err
