"""Scenario reading and --set overrides (pure Python, no simulation)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.scenario import BraidError, apply_override, load_scenario, parse_override, read_toml


def test_values_are_read_as_toml_else_string():
    assert parse_override("switch.pfc.enabled=false") == (["switch", "pfc", "enabled"], False)
    assert parse_override("nic.mtu=4096") == (["nic", "mtu"], 4096)
    assert parse_override("switch.ecn.pmax=0.2") == (["switch", "ecn", "pmax"], 0.2)
    assert parse_override("transport.kind=none") == (["transport", "kind"], "none")
    assert parse_override('traffic[0].size="1MB"') == (["traffic", 0, "size"], "1MB")
    assert parse_override("traffic[0].size=1MB") == (["traffic", 0, "size"], "1MB")
    assert parse_override("switch.lossless=[3, 4]") == (["switch", "lossless"], [3, 4])
    assert parse_override('topology.host_link={ rate = "40Gbps", delay = "1us" }') == (
        ["topology", "host_link"],
        {"rate": "40Gbps", "delay": "1us"},
    )
    assert parse_override("name=") == (["name"], "")
    assert parse_override("name=a=b") == (["name"], "a=b")


def test_key_syntax():
    assert parse_override('middleware.per_host."3"=["raw"]')[0] == ["middleware", "per_host", "3"]
    assert parse_override("middleware.per_host.3=[]")[0] == ["middleware", "per_host", "3"]
    assert parse_override("a[-1].b=1")[0] == ["a", -1, "b"]
    assert parse_override('"x=y".z=1') == (["x=y", "z"], 1)
    assert parse_override(" a.b = 1 ") == (["a", "b"], 1)


@pytest.mark.parametrize("bad", ["foo", "=1", "a..b=1", "a.=1", ".a=1", "a[x]=1", "a[0=1", 'a."b=1', "a b=1"])
def test_bad_override_syntax(bad):
    with pytest.raises(BraidError) as e:
        parse_override(bad)
    assert e.value.path == f"--set {bad}"


def test_apply_creates_tables_and_indexes_arrays():
    d = {"traffic": [{"pattern": "incast", "size": "1KB"}, {"pattern": "permutation", "size": "2KB"}]}
    apply_override(d, "switch.pfc.enabled=false")
    apply_override(d, 'traffic[1].size="9MB"')
    apply_override(d, "traffic[-1].start=10us")
    apply_override(d, "traffic[0]={ pattern = \"flows\", flows = [] }")
    assert d["switch"] == {"pfc": {"enabled": False}}
    assert d["traffic"][1] == {"pattern": "permutation", "size": "9MB", "start": "10us"}
    assert d["traffic"][0] == {"pattern": "flows", "flows": []}


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("traffic[5].size=1", "index out of range"),
        ("apps[0].size=1", "does not exist"),
        ("duration.x=1", "duration is not a table"),
        ("traffic.size=1", "traffic is not a table"),
        ("name[0]=1", "name is not an array"),
    ],
)
def test_apply_errors_name_the_key(spec, fragment):
    d = {"name": "x", "duration": "1ms", "traffic": [{"size": "1KB"}]}
    with pytest.raises(BraidError) as e:
        apply_override(d, spec)
    assert e.value.path == f"--set {spec}"
    assert fragment in e.value.message


keys = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
values = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet=string.ascii_letters + string.digits + " _-.", max_size=12),
    st.lists(st.integers(min_value=0, max_value=100), max_size=4),
)


def _toml_literal(v) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v)


@given(path=st.lists(keys, min_size=1, max_size=4), value=values)
def test_override_sets_exactly_the_value(path, value):
    d: dict = {}
    apply_override(d, ".".join(path) + "=" + _toml_literal(value))
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    assert cur[path[-1]] == value


def test_toml_errors_carry_file_line_col(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('name = "x"\nduration = 5ms\n')
    with pytest.raises(BraidError) as e:
        read_toml(p)
    assert e.value.path == f"{p}:2:13"  # at the "m" of 5ms
    assert "invalid TOML" in e.value.message


def test_toml_error_at_end_of_document(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('name = "x"\n[topology')
    with pytest.raises(BraidError) as e:
        read_toml(p)
    assert e.value.path.startswith(f"{p}:2:")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(BraidError, match="no such file"):
        load_scenario(tmp_path / "nope.toml")
    with pytest.raises(BraidError, match="is a directory"):
        load_scenario(tmp_path)


def test_load_from_dict_copies_and_applies(small_toml):
    import tomllib

    d = tomllib.loads(small_toml)
    sc = load_scenario(d, ["transport.kind=none"])
    assert sc.data["transport"]["kind"] == "none"
    assert d["transport"]["kind"] == "dcqcn"
    assert sc.name == "small two-tor"
    assert sc.overrides == ["transport.kind=none"]


def test_file_relative_base_dir(small_file):
    sc = load_scenario(small_file)
    assert sc.base_dir == small_file.parent.resolve()
    assert sc.source == small_file


def test_non_finite_numbers_rejected():
    with pytest.raises(BraidError) as e:
        load_scenario({"switch": {"ecn": {"pmax": 0.1}}}, ["switch.ecn.pmax=nan"])
    assert e.value.path == "switch.ecn.pmax"


@pytest.mark.parametrize(
    "override, path, words",
    [
        ('topology.host_link.rate="40Gbs"', "topology.host_link.rate", 'got "40Gbs"'),
        ("topology.spines=3", "topology.spines", "unknown field"),
        ("traffic[0].sizes=1", "traffic[0].sizes", "unknown field"),
        ("topology.paths=-1", "topology.paths", "expected a whole number from 0 to 4294967295, got -1"),
        ('traffic[0]={pattern="incast", receiver=0, senders="x", size="1KB"}', "traffic[0].senders", 'expected a number of senders (e.g. 8) or a list of host indices (e.g. [1, 2, 3]), got "x"'),
        ("measure.cc.qps=3", "measure.cc.qps", "got 3"),
    ],
)
def test_core_errors_come_in_the_users_terms(small_file, override, path, words):
    # The core words its refusals (crates/braid-sim/src/scenario/wording.rs): the culprit's key
    # path and the expected form, no Rust type names, no JSON positions; Python passes them on.
    from braid import _core

    sc = load_scenario(small_file, [override])
    with pytest.raises(_core.ScenarioError) as e:
        _core.capacity(sc.to_json(), str(sc.base_dir), False)
    assert e.value.path == path, (e.value.path, e.value.message)
    assert words in e.value.message, e.value.message
    for rust in ("u32", "untagged", "enum ", "struct ", "sequence", " at line "):
        assert rust not in e.value.message, e.value.message
