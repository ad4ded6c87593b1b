"""The dataloader face without a database: job UUIDs, the switch's settings, the start-time check."""

from __future__ import annotations

import uuid

import pytest

from queue_engine.foundation.errors import ConfigError
from queue_engine.web.compat.dataloader import JOB_ID_PATTERN, check_compat
from queue_engine.web.compat.ids import ID_MAX, MARKER, job_id_of, job_uuid
from queue_engine.web.first_run import nothing_configured
from queue_engine.web.settings import WebSettings


@pytest.mark.parametrize("job_id", [1, 42, 2**32, 2**62 - 1, 2**62, 2**62 + 7, ID_MAX])
def test_a_job_uuid_is_rfc_9562_version_8_and_decodes_to_its_id(job_id: int) -> None:
    value = job_uuid(job_id)
    assert value.version == 8 and value.variant == uuid.RFC_4122
    assert value.int >> 80 == MARKER
    assert job_id_of(value) == job_id
    assert job_id_of(uuid.UUID(str(value).upper())) == job_id


def test_job_42_reads_as_documented() -> None:
    assert str(job_uuid(42)) == "71656e67-696e-8000-8000-00000000002a"


def test_ids_outside_bigint_have_no_uuid() -> None:
    for bad in (0, -1, ID_MAX + 1):
        with pytest.raises(ValueError, match="1 to 2\\^63-1"):
            job_uuid(bad)


def test_other_uuids_decode_to_no_job() -> None:
    ours = job_uuid(42).int
    others = [
        uuid.UUID("550e8400-e29b-41d4-a716-446655440000"),  # dataloader's (version 4)
        uuid.uuid4(),
        uuid.UUID(int=ours ^ (1 << 100)),  # another marker
        uuid.UUID(int=(ours & ~(0xF << 76)) | (4 << 76)),  # version 4 with our marker
        uuid.UUID(int=ours & ~(0b11 << 62)),  # another variant
        uuid.UUID(int=ours | (0x2 << 64)),  # unused bits set
        uuid.UUID(int=(ours >> 64) << 64 | (0b10 << 62)),  # id 0
    ]
    assert [job_id_of(u) for u in others] == [None] * len(others)


def test_the_path_pattern_takes_uuids_and_decimal_ids_only() -> None:
    import re

    pattern = re.compile(JOB_ID_PATTERN)
    for good in (str(job_uuid(7)), str(uuid.uuid4()).upper(), uuid.uuid4().hex, "1", "42"):
        assert pattern.match(good), good
    for bad in ("0", "-1", "not-a-uuid", "12345678901234567890", str(uuid.uuid4())[:-1]):
        assert not pattern.match(bad), bad


def test_the_switch_and_its_settings_come_from_the_environment() -> None:
    settings = WebSettings.from_env(
        {
            "QUEUE_ENGINE_WEB_COMPAT": "Dataloader",
            "QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS": "on",
            "QUEUE_ENGINE_WEB_ENVIRONMENT": "staging",
        }
    )
    assert (settings.compat, settings.compat_anonymous, settings.environment) == (
        "dataloader",
        True,
        "staging",
    )
    assert not settings.compat_anonymous_any_host
    assert WebSettings.from_env({}).compat == "off"
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_WEB_COMPAT='pqrun' is not valid"):
        WebSettings.from_env({"QUEUE_ENGINE_WEB_COMPAT": "pqrun"})


def test_anonymous_dataloader_routes_stay_on_loopback_unless_forced() -> None:
    on = {"compat": "dataloader", "compat_anonymous": True}
    check_compat(WebSettings(**on))  # loopback: fine
    check_compat(WebSettings(host="::1", **on))
    check_compat(WebSettings(host="0.0.0.0", compat_anonymous_any_host=True, **on))
    check_compat(WebSettings(host="0.0.0.0", compat="dataloader"))  # no anonymous: fine
    with pytest.raises(ConfigError) as refused:
        check_compat(WebSettings(host="0.0.0.0", port=8081, **on))
    line = str(refused.value)
    assert "\n" not in line and "0.0.0.0:8081" in line
    assert "QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS_ANY_HOST=on" in line
    with pytest.raises(ConfigError, match="needs --compat dataloader"):
        check_compat(WebSettings(compat_anonymous=True))


def test_anonymous_dataloader_routes_are_a_configuration_not_a_first_run() -> None:
    assert nothing_configured(WebSettings())
    assert not nothing_configured(WebSettings(compat="dataloader", compat_anonymous=True))
