"""Each limit is a 400 whose code names it; trusted callers may override limits per call."""

import pytest

from spinfc.config import Limits, LimitExceeded
from spinfc.config.limits import ERROR_CODES, LIMIT_NAMES
from spinfc.errors import RequestError

DEFAULTS = {
    "max_content_tokens": 4096, "max_query_tokens": 256, "max_prompts_per_input": 10_000,
    "max_extractions_per_input": 10, "max_processed_tokens": 2_000_000, "max_body_bytes": 2_000_000,
    "max_options": 1000, "max_option_tokens": 5,
    # not in the operator's guide: the bounds of an extraction slot's search (issue 10)
    "max_beam_width": 16, "max_slot_tokens": 256,
    # the decode work one request may ask for (issue 24)
    "max_decode_tokens": 65_536,
    # media (the operator's guide), and one not in it: the bytes of a fetched media file
    "max_frames": 1024, "max_audio_seconds": 600, "max_image_pixels": 50_000_000, "max_fetch_bytes": 20_000_000,
}


def test_defaults_are_the_operator_guides():
    assert Limits().as_dict() == DEFAULTS
    assert set(LIMIT_NAMES) == set(DEFAULTS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_each_limit_allows_its_value_and_refuses_one_more(name):
    limits = Limits()
    limits.check(name, DEFAULTS[name], param="inputs[0]")  # at the limit: allowed
    with pytest.raises(LimitExceeded) as caught:
        limits.check(name, DEFAULTS[name] + 1, param="inputs[0]")
    error = caught.value
    assert isinstance(error, RequestError)
    assert error.status == 400 and error.code == f"{name}_exceeded" == ERROR_CODES[name]
    assert error.param == "inputs[0]" and error.limit_name == name
    assert f"{DEFAULTS[name] + 1:,}" in error.message and f"limit of {DEFAULTS[name]:,} ({name})" in error.message
    assert "--" + name.replace("_", "-") in error.hint and f"SPINFC_{name.upper()}" in error.hint


def test_error_codes_are_distinct():
    assert len(set(ERROR_CODES.values())) == len(LIMIT_NAMES)


def test_message_says_what_was_counted():
    with pytest.raises(LimitExceeded, match=r"scoring.queries\[2\].options: 1,001 options of one query"):
        Limits().check("max_options", 1001, "scoring.queries[2].options")


def test_unknown_limit_name_is_a_programming_error():
    with pytest.raises(AttributeError):
        Limits().check("max_things", 1)


def test_trusted_overrides():
    limits = Limits().with_overrides({"max_options": 5000, "max_content_tokens": 8192})
    assert (limits.max_options, limits.max_content_tokens, limits.max_query_tokens) == (5000, 8192, 256)
    limits.check("max_options", 5000)
    with pytest.raises(RequestError) as caught:
        Limits().with_overrides({"max_option": 3})
    assert caught.value.code == "invalid_limits" and caught.value.param == "limits.max_option"
    assert "max_options" in caught.value.hint
    for bad in (0, -1, "10", True, 1.5):
        with pytest.raises(RequestError, match="must be a positive integer") as caught:
            Limits().with_overrides({"max_options": bad})
        assert caught.value.param == "limits.max_options"
    with pytest.raises(RequestError, match="must be an object"):
        Limits().with_overrides([1, 2])
