"""Store configuration: RocketMQ names and defaults, broker.conf strings, clear errors."""

from __future__ import annotations

import os

import pytest

from shmq.config import MessageStoreConfig, parse_host, snake_case
from shmq.errors import ConfigError


def test_rocketmq_defaults():
    cfg = MessageStoreConfig()
    assert cfg.mapped_file_size_commit_log == 1 << 30
    assert cfg.consume_queue_file_size == 6_000_000
    assert cfg.flush_disk_type == "ASYNC_FLUSH" and not cfg.sync_flush
    assert (cfg.file_reserved_time, cfg.delete_when) == (72, "04")
    assert (cfg.max_hash_slot_num, cfg.max_index_num) == (5_000_000, 20_000_000)
    assert cfg.max_message_size == 4 * 1024 * 1024
    assert cfg.disk_max_used_space_ratio == 75


def test_broker_conf_strings_and_camel_case():
    cfg = MessageStoreConfig.from_mapping(
        {
            "mappedFileSizeCommitLog": "8192",
            "flushDiskType": "SYNC_FLUSH",
            "checkCRCOnRecover": "false",
            "deleteWhen": "03;04",
            "fileReservedTime": " 48 ",
        }
    )
    assert cfg.mapped_file_size_commit_log == 8192 and cfg.sync_flush
    assert cfg.check_crc_on_recover is False
    assert cfg.delete_when == "03;04" and cfg.file_reserved_time == 48
    assert snake_case("checkCRCOnRecover") == "check_crc_on_recover"
    assert snake_case("already_snake") == "already_snake"
    assert snake_case("warmMapedFileEnable") == "warm_mapped_file_enable"  # RocketMQ's typo


def test_consume_queue_size_rounds_up_to_whole_units():
    assert MessageStoreConfig(mapped_file_size_consume_queue=30).consume_queue_file_size == 40


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"flushDiskType": "FAST"}, "flushDiskType 'FAST'"),
        ({"mappedFileSizeCommitLog": "10000"}, "multiple of the 4096-byte page"),
        ({"mappedFileSizeCommitLog": "big"}, "not a valid int"),
        ({"checkCRCOnRecover": "yes"}, "not a valid bool"),
        ({"deleteWhen": "25"}, "deleteWhen"),
        ({"storeHost": "localhost"}, "IPv4"),
        ({"maxMessageSize": 0}, "maxMessageSize"),
        ({"noSuchKey": 1}, "unknown store config key 'noSuchKey'"),
    ],
)
def test_bad_values_name_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match):
        MessageStoreConfig.from_mapping(overrides)


def test_parse_host():
    assert parse_host("10.1.2.3:10911") == ("10.1.2.3", 10911)
    for bad in ("10.1.2.3", "10.1.2:1", "300.1.1.1:1", "1.1.1.1:99999"):
        with pytest.raises(ConfigError):
            parse_host(bad)


def test_a_local_client_group_must_exist():
    assert MessageStoreConfig().local_client_gid == -1
    with pytest.raises(ConfigError, match="localClientGroup 'no-such-shmq-group': no such group"):
        MessageStoreConfig(local_client_group="no-such-shmq-group")
    mine = os.getegid()
    assert MessageStoreConfig(local_client_group=str(mine)).local_client_gid == mine
