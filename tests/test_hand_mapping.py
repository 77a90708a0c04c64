"""SDK <-> joint mapping, mimic completion, command validation and the spec file loader.

Expected numbers are computed by hand from the tables in assets/hands/g20_left_spec.yaml
(e.g. channel 0, value 100, DIR -1, MAX 0.91: 0.91 * (255 - 100) / 255 = 0.553137...).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from dockbench.hand.mapping import (
    arc_to_range,
    complete_mimic,
    joint_positions_to_sdk,
    range_to_arc,
    sdk_to_joint_positions,
    validate_joint_command,
    validate_sdk_values,
)
from dockbench.hand.spec import load_spec, parse_spec
from dockbench.sim.errors import HandCommandError, ModelError

ATOL = 1e-6  # [rad] hand-computed values are given to 6+ digits

FINGERS = ("index", "middle", "ring", "pinky")


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def one_channel(channel: int, value: float) -> list[float]:
    cmd = [255.0] * 20
    cmd[channel] = value
    return cmd


# (channel, value, {joint: expected rad}) -- every driven channel, hand-computed
CASES = [
    (0, 0, {"thumb_cmc_pitch": 0.91}),
    (0, 255, {"thumb_cmc_pitch": 0.0}),
    (0, 100, {"thumb_cmc_pitch": 0.553137255}),
    (1, 0, {"index_mcp_pitch": 1.22}),
    (1, 255, {"index_mcp_pitch": 0.0}),
    (1, 51, {"index_mcp_pitch": 0.976}),
    (2, 51, {"middle_mcp_pitch": 0.976}),
    (3, 0, {"ring_mcp_pitch": 1.22}),
    (4, 51, {"pinky_mcp_pitch": 0.976}),
    (5, 0, {"thumb_cmc_roll": 1.47}),
    (5, 102, {"thumb_cmc_roll": 0.882}),
    (5, 255, {"thumb_cmc_roll": 0.0}),
    (6, 0, {"index_mcp_roll": -0.26}),
    (6, 255, {"index_mcp_roll": 0.26}),
    (6, 193, {"index_mcp_roll": 0.133568627}),
    (7, 148, {"middle_mcp_roll": 0.041803922}),
    (8, 105, {"ring_mcp_roll": -0.045882353}),
    (9, 42, {"pinky_mcp_roll": -0.174352941}),
    (10, 245, {"thumb_cmc_yaw": 0.063921569}),
    (10, 0, {"thumb_cmc_yaw": 1.63}),
    (15, 0, {"thumb_mcp": 1.26, "thumb_ip": 1.2852}),
    (15, 153, {"thumb_mcp": 0.504, "thumb_ip": 0.51408}),
    (15, 255, {"thumb_mcp": 0.0, "thumb_ip": 0.0}),
    (16, 0, {"index_pip": 1.74, "index_dip": 1.5486}),
    (16, 80, {"index_pip": 1.194117647, "index_dip": 1.062764706}),
    (17, 0, {"middle_pip": 1.74, "middle_dip": 1.5486}),
    (18, 80, {"ring_pip": 1.194117647, "ring_dip": 1.062764706}),
    (19, 255, {"pinky_pip": 0.0, "pinky_dip": 0.0}),
]


@pytest.mark.parametrize("channel,value,expected", CASES)
def test_every_channel_hand_computed(spec, channel, value, expected):
    q = sdk_to_joint_positions(one_channel(channel, value), spec)
    assert len(q) == 21
    for joint, rad in expected.items():
        np.testing.assert_allclose(q[joint], rad, atol=ATOL, err_msg=f"ch{channel}={value} -> {joint}")


def test_open_and_half_fist_presets(spec):
    open_ = spec.preset("open")
    assert open_ == (255,) * 6 + (193, 148, 105, 42, 245) + (255,) * 9
    half = list(open_)
    for c in (0, 1, 2, 3, 4, 15, 16, 17, 18, 19):
        half[c] = 80
    assert spec.preset("half_fist") == tuple(half)
    q = sdk_to_joint_positions(open_, spec)
    expected_open = dict.fromkeys(spec.joint_names, 0.0)
    expected_open.update(
        index_mcp_roll=0.133568627,
        middle_mcp_roll=0.041803922,
        ring_mcp_roll=-0.045882353,
        pinky_mcp_roll=-0.174352941,
        thumb_cmc_yaw=0.063921569,
    )
    np.testing.assert_allclose(
        [q[n] for n in spec.joint_names], [expected_open[n] for n in spec.joint_names], atol=ATOL
    )
    qh = sdk_to_joint_positions(half, spec)
    np.testing.assert_allclose(qh["thumb_cmc_pitch"], 0.624509804, atol=ATOL)
    np.testing.assert_allclose(qh["thumb_mcp"], 0.864705882, atol=ATOL)
    np.testing.assert_allclose(qh["thumb_ip"], 0.882, atol=ATOL)
    for f in FINGERS:
        np.testing.assert_allclose(qh[f"{f}_mcp_pitch"], 0.837254902, atol=ATOL)
        np.testing.assert_allclose(qh[f"{f}_pip"], 1.194117647, atol=ATOL)
        np.testing.assert_allclose(qh[f"{f}_dip"], 1.062764706, atol=ATOL)


def test_short_command_padded_with_255(spec):
    sdk = validate_sdk_values([0, 10], spec)
    assert sdk.padded == 18 and sdk.clamped == ()
    np.testing.assert_array_equal(sdk.values, [0, 10] + [255] * 18)  # exact: clamped to the integer bounds
    q = sdk_to_joint_positions([0], spec)
    np.testing.assert_allclose(q["thumb_cmc_pitch"], 0.91, atol=ATOL)
    np.testing.assert_allclose(q["index_mcp_pitch"], 0.0, atol=ATOL)
    np.testing.assert_allclose(q["index_mcp_roll"], 0.26, atol=ATOL)  # DIR +1: 255 -> MAX
    np.testing.assert_allclose(sdk_to_joint_positions([255], spec)["thumb_cmc_roll"], 0.0, atol=ATOL)


def test_empty_command_is_rejected_not_padded(spec):
    """An empty SDK frame would pad to all 255 and open the hand fully: it is refused instead."""
    with pytest.raises(HandCommandError, match="empty") as exc:
        validate_sdk_values([], spec)
    assert exc.value.kind == "empty"
    with pytest.raises(HandCommandError, match="empty"):
        validate_sdk_values(np.zeros(0), spec)


@pytest.mark.parametrize("values, kind", [
    ([10**400], "not_finite"),  # float(10**400) is an OverflowError
    ([0, -(10**400)], "not_finite"),
    ([float("nan")], "not_finite"),
    ([None], "not_a_number"),
    ([True], "not_a_number"),
    ([[1]], "not_a_number"),
    (list(range(21)), "too_many_values"),
    (np.zeros((2, 2)), "bad_shape"),
    ("255", "not_a_sequence"),
    (b"\x80" * 20, "not_a_sequence"),
    (bytearray(b"\x80" * 20), "not_a_sequence"),  # issue 36: bytearray and memoryview are treated like bytes
    (memoryview(b"\x80" * 20), "not_a_sequence"),
])
def test_bad_sdk_values_raise_hand_command_errors_with_a_kind(spec, values, kind):
    with pytest.raises(HandCommandError) as exc:
        validate_sdk_values(values, spec)
    assert exc.value.kind == kind


@pytest.mark.parametrize("positions, kind", [
    ({"index_pip": 10**400}, "not_finite"),
    ({"index_pip": float("inf")}, "not_finite"),
    ({1: 0.3}, "unknown_name"),
    ({}, "empty"),
    ([("index_pip", 0.1)], "not_a_mapping"),
])
def test_bad_joint_commands_raise_hand_command_errors_with_a_kind(spec, positions, kind):
    with pytest.raises(HandCommandError) as exc:
        validate_joint_command(positions, spec)
    assert exc.value.kind == kind


def test_out_of_range_values_are_clamped_and_reported(spec):
    sdk = validate_sdk_values([300, -5, 128.5], spec)
    assert sdk.clamped == (0, 1)
    np.testing.assert_array_equal(sdk.values[:3], [255, 0, 128.5])  # exact: clamped / passed through
    q = sdk_to_joint_positions([300, -5], spec)
    np.testing.assert_allclose([q["thumb_cmc_pitch"], q["index_mcp_pitch"]], [0.0, 1.22], atol=ATOL)
    assert not sdk.values.flags.writeable


@pytest.mark.parametrize(
    "bad,fragment",
    [
        ([255] * 21, "at most 20"),
        (["a"] + [255] * 3, "expected a number"),
        ([None], "expected a number"),
        ([True, 3], "expected a number"),
        ([[1, 2]], "expected a number"),
        ([float("nan")], "not finite"),
        ([1.0, float("inf")], "not finite"),
        (np.array([1.0, -np.inf]), "not finite"),
        (np.zeros((2, 10)), "1-D"),
        (np.array(["1", "2"]), "numeric"),
        ("255,255", "sequence"),
        (42, "sequence"),
        (None, "sequence"),
        ({"index_pip": 1.0}, "sequence"),
    ],
)
def test_bad_sdk_commands_are_refused_whole(spec, bad, fragment):
    with pytest.raises(HandCommandError, match=fragment):
        sdk_to_joint_positions(bad, spec)


def test_complete_mimic_never_overwrites(spec):
    given = {"thumb_mcp": 0.5, "index_pip": 1.0, "index_dip": 0.3}
    out = complete_mimic(given, spec)
    np.testing.assert_allclose(out["thumb_ip"], 0.51, atol=1e-12)
    assert out["index_dip"] == 0.3  # given value kept (exact: not recomputed)
    assert "middle_dip" not in out  # driver absent -> mimic absent
    assert given == {"thumb_mcp": 0.5, "index_pip": 1.0, "index_dip": 0.3}  # input untouched
    # complete set: every mimic equals ratio * driver
    full = complete_mimic({n: 0.4 for n in spec.active_names}, spec)
    assert len(full) == 21
    for j in spec.joints:
        if j.mimic_of:
            np.testing.assert_allclose(full[j.name], j.ratio * 0.4, atol=1e-12)


def test_name_based_command_validation(spec):
    out = validate_joint_command({"index_pip": 1.0, "thumb_ip": np.float32(0.25)}, spec)
    np.testing.assert_allclose(out["index_dip"], 0.89, atol=1e-12)
    np.testing.assert_allclose(out["thumb_ip"], 0.25, atol=1e-7)
    assert "thumb_mcp" not in out
    with pytest.raises(HandCommandError, match="unknown joint name.*'index_yaw'.*valid: thumb_cmc_pitch"):
        validate_joint_command({"index_yaw": 0.1, "index_pip": 0.2}, spec)
    with pytest.raises(HandCommandError, match="not finite"):
        validate_joint_command({"index_pip": math.nan}, spec)
    with pytest.raises(HandCommandError, match="expected a number"):
        validate_joint_command({"index_pip": "0.3"}, spec)
    with pytest.raises(HandCommandError, match="expected a number"):
        validate_joint_command({"index_pip": False}, spec)
    with pytest.raises(HandCommandError, match="mapping"):
        validate_joint_command([0.1, 0.2], spec)
    with pytest.raises(HandCommandError, match="empty"):
        validate_joint_command({}, spec)


def test_round_trip_joint_to_sdk(spec):
    rng = np.random.default_rng(7)
    values = rng.integers(0, 256, size=20).astype(float)
    values[11:15] = 255  # reserved
    q = sdk_to_joint_positions(values, spec)
    np.testing.assert_allclose(joint_positions_to_sdk(q, spec), values, atol=1e-9)
    np.testing.assert_allclose(arc_to_range(range_to_arc(values, spec), spec), values, atol=1e-9)
    open_q = sdk_to_joint_positions(spec.preset("open"), spec)
    np.testing.assert_allclose(joint_positions_to_sdk(open_q, spec), spec.preset("open"), atol=1e-9)


def _raw_spec() -> dict:
    from importlib import resources

    return yaml.safe_load(resources.files("dockbench.assets").joinpath("hands", "g20_left_spec.yaml").read_text())


def test_spec_loader_rejects_bad_files(tmp_path):
    raw = _raw_spec()
    raw["sdk"]["maxx"] = raw["sdk"]["max"]
    with pytest.raises(ModelError, match=r"sdk\.maxx: unknown key"):
        parse_spec(raw, "x.yaml")
    raw = _raw_spec()
    raw["sdk"]["min"] = raw["sdk"]["min"][:19]
    with pytest.raises(ModelError, match=r"x.yaml: sdk\.min: expected a list of 20"):
        parse_spec(raw, "x.yaml")
    raw = _raw_spec()
    raw["sdk"]["joint"][3] = "ring_knuckle"
    with pytest.raises(ModelError, match=r"sdk\.joint\[3\]: unknown joint 'ring_knuckle'"):
        parse_spec(raw, "x.yaml")
    raw = _raw_spec()
    raw["presets"]["open"][0] = 256
    with pytest.raises(ModelError, match=r"presets\.open\[0\]"):
        parse_spec(raw, "x.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ModelError, match="invalid YAML"):
        load_spec(bad)


def test_swapping_the_spec_file_changes_the_calibration(tmp_path, spec):
    """A user calibration is one file: a different MAX[1] changes channel 1 and nothing else."""
    raw = _raw_spec()
    raw["sdk"]["max"][1] = 1.0
    path = tmp_path / "my_g20.yaml"
    path.write_text(yaml.safe_dump(raw))
    mine = load_spec(path)
    a = sdk_to_joint_positions(one_channel(1, 0), mine)
    b = sdk_to_joint_positions(one_channel(1, 0), spec)
    np.testing.assert_allclose(a["index_mcp_pitch"], 1.0, atol=ATOL)
    np.testing.assert_allclose(b["index_mcp_pitch"], 1.22, atol=ATOL)
    assert {k: v for k, v in a.items() if k != "index_mcp_pitch"} == {
        k: v for k, v in b.items() if k != "index_mcp_pitch"
    }
