"""Consumer offsets, and the fastjson text and .tmp/.bak persistence they are kept with."""

from __future__ import annotations

import logging
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq import json_file
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.errors import ConfigError

OFFSETS_JSON = (
    "{\n"
    '\t"offsetTable":{\n'
    '\t\t"%RETRY%G@G":{\n'
    "\t\t\t0:3\n"
    "\t\t},\n"
    '\t\t"T@G":{\n'
    "\t\t\t0:12,\n"
    "\t\t\t1:7,\n"
    "\t\t\t2:0,\n"
    "\t\t\t10:250\n"
    "\t\t}\n"
    "\t}\n"
    "}"
)


# -- fastjson text ---------------------------------------------------------------------------


def test_offsets_json_is_byte_exact():
    table = {"offsetTable": {"T@G": {10: 250, 2: 0, 1: 7, 0: 12}, "%RETRY%G@G": {0: 3}}}
    assert json_file.dumps_fastjson(table) == OFFSETS_JSON
    assert json_file.loads_fastjson(OFFSETS_JSON) == table


def test_dumps_details():
    obj = {"b": True, "a": None, "c": [], "d": {}, "e": [1, {"x": False}], 3: 's\t"é'}
    assert json_file.dumps_fastjson(obj) == (
        '{\n\t3:"s\\t\\"é",\n\t"b":true,\n\t"c":[],\n\t"d":{},\n'
        '\t"e":[\n\t\t1,\n\t\t{\n\t\t\t"x":false\n\t\t}\n\t]\n}'
    )
    assert json_file.dumps_fastjson({}) == "{}"
    with pytest.raises(TypeError):
        json_file.dumps_fastjson({True: 1})


def test_loads_rocketmq_text():
    compact = '{"offsetTable":{"T@G":{0:12,1:7},"X@Y":{-1:5}}}'
    assert json_file.loads_fastjson(compact) == {
        "offsetTable": {"T@G": {0: 12, 1: 7}, "X@Y": {-1: 5}}
    }
    # Bare-key look-alikes inside strings stay as they are; quoted digits stay strings.
    tricky = '{"a":"{1:2,3:4}", "q\\"{5:6}":{ 7 :"x,8:"}, "9":1}'
    assert json_file.loads_fastjson(tricky) == {"a": "{1:2,3:4}", 'q"{5:6}': {7: "x,8:"}, "9": 1}
    assert json_file.loads_fastjson('{"9":1,"-2":{"x":3}}', int_keys=True) == {9: 1, -2: {"x": 3}}
    assert json_file.loads_fastjson('{"\\u0000":1,"\\u00001":2,"k":"\\u00003"}') == {
        "\x00": 1,
        "\x001": 2,
        "k": "\x003",
    }
    with pytest.raises(ValueError):
        json_file.loads_fastjson("{0:}")


keys = st.text(max_size=6) | st.integers(-(2**40), 2**40)
values = st.recursive(
    st.integers(-(2**62), 2**62) | st.booleans() | st.text(max_size=8),
    lambda inner: st.dictionaries(keys, inner, max_size=4) | st.lists(inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_fastjson_round_trip(obj):
    text = json_file.dumps_fastjson(obj)
    assert json_file.loads_fastjson(text) == obj
    assert json_file.dumps_fastjson(json_file.loads_fastjson(text)) == text


# -- persistence -----------------------------------------------------------------------------


def test_persist_keeps_bak_and_no_tmp(tmp_path):
    path = tmp_path / "sub" / "f.json"
    json_file.persist(str(path), "one")
    assert not os.path.exists(f"{path}.bak")
    json_file.persist(str(path), "two")
    assert path.read_text() == "two" and (tmp_path / "sub" / "f.json.bak").read_text() == "one"
    assert sorted(os.listdir(tmp_path / "sub")) == ["f.json", "f.json.bak"]


def test_persist_failure_leaves_no_tmp(tmp_path, monkeypatch):
    path = str(tmp_path / "f.json")
    json_file.persist(path, '{"a":1}')

    def broken(*_args):
        raise OSError("disk on fire")

    monkeypatch.setattr(json_file.os, "replace", broken)
    with pytest.raises(OSError, match="disk on fire"):
        json_file.persist(path, '{"a":2}')
    assert not os.path.exists(path + ".tmp")
    assert json_file.load(path) == {"a": 1}


@pytest.mark.parametrize("main", [None, "", "  \n", '{"a":', "garbage"])
def test_load_falls_back_to_bak(tmp_path, caplog, main):
    path = str(tmp_path / "f.json")
    json_file.persist(path, '{"a":1}')
    json_file.persist(path, '{"a":2}')
    if main is None:
        os.unlink(path)
    else:
        with open(path, "w") as f:
            f.write(main)
    with caplog.at_level(logging.WARNING):
        assert json_file.load(path) == {"a": 1}
    assert "f.json.bak" in caplog.text


def test_load_nothing_or_nothing_usable(tmp_path):
    path = str(tmp_path / "f.json")
    assert json_file.load(path) is None
    with open(path + ".bak", "w"):
        pass
    assert json_file.load(path) is None  # empty files count as absent
    with open(path, "w") as f:
        f.write("{bad")
    with pytest.raises(ConfigError, match=r"cannot load .*f\.json"):
        json_file.load(path)


def test_load_uses_the_parse_callable(tmp_path):
    path = str(tmp_path / "f.txt")
    json_file.persist(path, "12")
    json_file.persist(path, "x")
    assert json_file.load(path, int) == 12  # "x" raises ValueError: the .bak is used


# -- the manager -----------------------------------------------------------------------------


def test_commit_query_persist_reload(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.query("G", "T", 0) == -1 and not m.dirty
    m.commit("G", "T", 1, 7)
    m.commit("G", "T", 0, 5)
    m.commit("G", "T", 0, 12)
    m.commit("G", "T", 2, 0)
    m.commit("G", "T", 10, 250)
    m.commit("G", "%RETRY%G", 0, 3)
    assert m.dirty
    assert m.query("G", "T", 0) == 12 and m.query("G", "T", 3) == -1
    assert m.offsets("G", "T") == {0: 12, 1: 7, 2: 0, 10: 250}
    m.persist_if_dirty()
    assert not m.dirty
    assert (tmp_path / "consumerOffset.json").read_text() == OFFSETS_JSON
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.offsets("G", "T") == m.offsets("G", "T") and again.query("G", "%RETRY%G", 0) == 3
    assert not os.path.exists(tmp_path / "consumerOffset.json.tmp")


def test_groups_and_topics(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit("G1", "T", 0, 1)
    m.commit("G2", "T", 0, 1)
    m.commit("G1", "U", 0, 1)
    assert m.groups_of_topic("T") == ["G1", "G2"] and m.groups_of_topic("V") == []
    assert m.topics_of_group("G1") == ["T", "U"]
    m.persist()
    assert m.remove_group("G1") is True and m.dirty
    assert m.remove_group("G1") is False
    assert m.topics_of_group("G1") == [] and m.query("G1", "T", 0) == -1
    assert m.groups_of_topic("T") == ["G2"]


def test_at_sign_and_empty_names_rejected(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    with pytest.raises(ConfigError, match="group 'a@b' must not contain '@'"):
        m.commit("a@b", "T", 0, 1)
    with pytest.raises(ConfigError, match="topic 'T@x' must not contain '@'"):
        m.query("G", "T@x", 0)
    with pytest.raises(ConfigError, match="group must not be empty"):
        m.offsets("", "T")


def test_loads_rocketmq_files(tmp_path):
    (tmp_path / "consumerOffset.json").write_text(
        '{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:251}}}'
    )
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.offsets("please_rename_unique_group_name_4", "TopicTest") == {0: 250, 1: 249, 2: 251}
    # 5.x: quoted queue ids are possible, plus dataVersion and the derived groupTopicMap.
    (tmp_path / "consumerOffset.json").write_text(
        '{"dataVersion":{"counter":1,"timestamp":1},"groupTopicMap":{"G":["T"]},'
        '"offsetTable":{"T@G":{"0":4}}}'
    )
    assert ConsumerOffsetManager(str(tmp_path)).offsets("G", "T") == {0: 4}


@pytest.mark.parametrize(
    "broken",
    ['{"offsetTable":{"TG":{0:1}}}', '{"offsetTable":{"T@G":{0:"x"}}}', '{"offsetTable":[]}', "[]"],
)
def test_bad_shapes_fall_back_to_bak(tmp_path, broken):
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit("G", "T", 0, 1)
    m.persist()
    m.commit("G", "T", 0, 2)
    m.persist()
    (tmp_path / "consumerOffset.json").write_text(broken)
    assert ConsumerOffsetManager(str(tmp_path)).query("G", "T", 0) == 1


def test_concurrent_commits_and_persists(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))

    def work(q: int) -> None:
        for offset in range(1, 201):
            m.commit("G", "T", q, offset)
            if offset % 50 == 0:
                m.persist_if_dirty()

    threads = [threading.Thread(target=work, args=(q,)) for q in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m.persist()
    assert ConsumerOffsetManager(str(tmp_path)).offsets("G", "T") == {q: 200 for q in range(4)}
    assert sorted(os.listdir(tmp_path)) == ["consumerOffset.json", "consumerOffset.json.bak"]
