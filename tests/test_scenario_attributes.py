"""``scenario.controller.k``: a typed block's keys read as its attributes (issue 30, item 4; docs/scenarios.md)."""

from __future__ import annotations

import copy
import pickle

import pytest

import dockbench


def test_a_typed_blocks_keys_read_as_its_attributes() -> None:
    """The value read is the config's own (the same object: exact), for every typed block; type and config
    stay what they were; copies and pickles keep it working."""
    s = dockbench.load_scenario("fr3_docking")
    assert s.controller.k == s.controller.config.k == 1000.0
    assert s.controller.type == "khatib" and s.target.mouth_radius == s.target.config.mouth_radius
    assert s.planner.v_max == s.planner.config.v_max and s.tool.radius == s.tool.config.radius
    assert s.replace({"controller.k": 800}).controller.k == 800.0
    for clone in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert clone.controller.k == 1000.0


def test_an_unknown_key_is_an_attribute_error_listing_the_blocks_keys() -> None:
    s = dockbench.load_scenario("fr3_docking")
    with pytest.raises(AttributeError) as exc:
        s.controller.kp  # noqa: B018 - the read is the test
    assert "'khatib' block has no key 'kp'" in str(exc.value) and "k_rot" in str(exc.value), str(exc.value)
    assert not hasattr(s.controller, "kp") and not hasattr(s.controller, "_private")
    with pytest.raises(AttributeError):  # frozen: the attribute is read-only
        s.controller.k = 5
