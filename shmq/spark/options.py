"""Options of the ``shmq`` Spark data source, parsed once and checked up front.

Spark hands a data source its options as strings with case-insensitive names. Everything is
checked on the driver before a job starts, so a typo or an impossible value fails the query
at once with a ``ConfigError`` that names the option and the bad value, instead of failing
later inside an executor. Nothing here imports pyspark: the parsers are plain functions that
the tests fuzz.

Options ``accessKey`` / ``secretKey`` (ACL credentials, which sign every request) and
``tls`` / ``tlsCa`` (TLS, checking the server's certificate against ``tlsCa`` when given)
are read and written alike; they reach every client the source makes, on the driver and in
the executors.

Offsets follow Spark's Kafka source: ``"earliest"``, ``"latest"``, or a JSON object
``{"Topic": {"0": 12, "1": -2}}`` per queue, where -2 means earliest and -1 latest. The
timestamp and trigger options (``startingOffsetsByTimestamp``, ``endingTimestamp``,
``minOffsetsPerTrigger``, ``maxTriggerDelay``, ...) take the values and defaults of Spark's
Kafka source too; the README's Spark section lists each Kafka option and what shmq does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from shmq.client.transport.chooser import check_transport
from shmq.errors import ConfigError, FilterExpressionError
from shmq.filter.sql92 import compile_sql
from shmq.message import validate_topic
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

EARLIEST = -2
LATEST = -1

# {topic: {queue id: offset}}; offsets may be EARLIEST / LATEST in user input.
Offsets = dict[str, dict[int, int]]
OffsetSpec = Literal["earliest", "latest"] | Offsets

CONNECTION_OPTIONS = frozenset({"accesskey", "secretkey", "tls", "tlsca"})
READ_OPTIONS = frozenset(
    {
        "store",
        "path",
        "namesrv",
        "broker",
        "topic",
        "topics",
        "topicpattern",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingtimestamp",
        "endingoffsetsbytimestamp",
        "maxoffsetspertrigger",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "failondataloss",
        "tags",
        "sql",
        "includeproperties",
        "includeheaders",
        "maxrowsperpartition",
        "minpartitions",
        "transport",
        *CONNECTION_OPTIONS,
    }
)
WRITE_OPTIONS = frozenset(
    {
        "namesrv",
        "topic",
        "producergroup",
        "sendtimeout",
        "writebatchsize",
        "exactlyonce",
        "jobid",
        *CONNECTION_OPTIONS,
    }
)
# Options that make sense for one kind of query only (Kafka's split), refused for the other.
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
# Names Spark itself may put among a source's options.
_SPARK_OWNED = frozenset({"path", "checkpointlocation", "queryname"})

DEFAULT_MAX_ROWS_PER_PARTITION = 1_000_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's maxTriggerDelay default, "15m"
# Spark's time-string suffixes (JavaUtils.timeStringAsMs): a bare number is milliseconds
_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                "d": 86_400_000}  # fmt: skip
DEFAULT_PRODUCER_GROUP = "shmq-spark-writer"
# the exactly-once sink's group: its producers answer check-backs, so no plain producer in it
DEFAULT_TRANSACTIONAL_GROUP = "shmq-spark-eos-writer"
DEFAULT_WRITE_BATCH_SIZE = 4096
MAX_QUEUE_ID = (1 << 31) - 1


@dataclass(frozen=True)
class ReadOptions:
    """The checked read options (see the module docstring and the README for meanings)."""

    store: str | None
    namesrv: str | None
    broker: str | None
    topics: tuple[str, ...] | None
    topic_pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    starting_by_timestamp: Offsets | None  # {topic: {queue id: ms}}, like startingOffsets
    # what a starting timestamp that matches no stored message means: fail, or the max offset
    starting_timestamp_strategy: Literal["error", "latest"]
    ending_timestamp: int | None  # batch only; no match: the max offset
    ending_by_timestamp: Offsets | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int  # how long minOffsetsPerTrigger may hold a micro-batch back
    fail_on_data_loss: bool
    tags: frozenset[str] | None
    sql: str | None  # a SQL92 property filter (RocketMQ's MessageSelector.bySql), checked
    include_properties: bool
    max_rows_per_partition: int
    min_partitions: int | None
    transport: str = "auto"  # "shm": the store's files; "tcp": PULL_MESSAGE; "auto": by host
    credentials: Credentials | None = None
    tls: TlsOptions | None = None
    include_headers: bool = False  # Kafka's headers column: the user properties

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is subscribed (by name, or fully matching the pattern)."""
        if self.topics is not None:
            return topic in self.topics
        assert self.topic_pattern is not None
        return re.fullmatch(self.topic_pattern, topic) is not None


@dataclass(frozen=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    producer_group: str
    send_timeout: float
    write_batch_size: int
    credentials: Credentials | None = None
    tls: TlsOptions | None = None
    exactly_once: bool = False  # transactional sink (``shmq.spark.transactional_sink``)
    job_id: str | None = None  # a batch write's identity across whole-job retries


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"option name {key!r} is not a string")
        out[key.lower()] = value
    return out


def _check_known(options: dict[str, str], known: frozenset[str], what: str) -> None:
    for key in options:
        if key not in known and key not in _SPARK_OWNED and "." not in key:
            raise ConfigError(
                f"unknown {what} option {key!r} for format shmq; known options: "
                + ", ".join(sorted(known))
            )


def parse_bool(value: str | None, option: str, default: bool) -> bool:
    if value is None:
        return default
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ConfigError(f"option {option} must be true or false, not {value!r}")


def parse_connection(opts: Mapping[str, str]) -> tuple[Credentials | None, TlsOptions | None]:
    """The credentials and TLS of the (lower-cased) options ``opts``."""
    access_key, secret_key = opts.get("accesskey") or None, opts.get("secretkey") or None
    if (access_key is None) != (secret_key is None):
        raise ConfigError("options accessKey and secretKey go together: give both or neither")
    credentials = Credentials(access_key, secret_key) if access_key and secret_key else None
    ca = opts.get("tlsca") or None
    tls = TlsOptions(ca_file=ca) if parse_bool(opts.get("tls"), "tls", False) or ca else None
    return credentials, tls


def parse_int(
    value: str | None, option: str, *, minimum: int, maximum: int = (1 << 63) - 1
) -> int | None:
    """An integer option in ``[minimum, maximum]``, or None when absent."""
    if value is None:
        return None
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d{1,19}", text):
        raise ConfigError(f"option {option} must be an integer, not {value!r}")
    number = int(text)
    if not minimum <= number <= maximum:
        raise ConfigError(f"option {option} must be in [{minimum}, {maximum}], not {number}")
    return number


def parse_duration_ms(value: str | None, option: str, default: int) -> int:
    """A Spark time string (``"15m"``, ``"30s"``, ``"500ms"``, ``"1h"``; a bare number is
    milliseconds), as Spark's Kafka source reads ``maxTriggerDelay``, in whole ms."""
    if value is None:
        return default
    match = re.fullmatch(r"\s*(\d{1,15})\s*([a-z]*)\s*", str(value).lower())
    if match is None or match.group(2) not in ("", *_DURATION_MS):
        raise ConfigError(
            f"option {option} must be a duration like 15m, 30s, 500ms, 1h or 1d (a bare "
            f"number is ms), not {value!r}"
        )
    return int(int(match.group(1)) * _DURATION_MS.get(match.group(2), 1))


def parse_sql(expression: str | None) -> str | None:
    """RocketMQ's SQL92 filter over a message's properties and TAGS, compiled here once so a
    bad one is refused on the driver with its position (``ConfigError``); None: no filter."""
    if expression is None or not expression.strip():
        return None
    try:
        compile_sql(expression)
    except FilterExpressionError as exc:
        raise ConfigError(f"option sql: {exc}") from None
    return expression


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """RocketMQ's tag expression ``"A || B"``; ``None``, ``""`` and ``"*"`` mean all tags."""
    if expression is None or expression.strip() in ("", "*"):
        return None
    tags = frozenset(t.strip() for t in expression.split("||"))
    if "" in tags or "*" in tags:
        raise ConfigError(
            f"option tags {expression!r} is not a tag expression: tags separated by '||' "
            "(each non-empty), or '*' alone for all tags"
        )
    for tag in tags:
        if "\x01" in tag or "\x02" in tag:
            raise ConfigError(f"option tags: tag {tag!r} contains a property separator")
    return tags


def parse_offsets(
    text: str | None,
    option: str,
    *,
    default: Literal["earliest", "latest"],
    allow_earliest: bool = True,
    allow_latest: bool = True,
) -> OffsetSpec:
    """``"earliest"`` / ``"latest"`` / a per-queue JSON object, checked for shape and range.

    The JSON may leave queues (and topics) out: they take the default of the option
    (earliest for starting offsets, latest for ending ones).
    """
    if text is None:
        return default
    stripped = str(text).strip()
    if stripped.lower() in ("earliest", "latest"):
        word = stripped.lower()
        if (word == "earliest" and not allow_earliest) or (word == "latest" and not allow_latest):
            raise ConfigError(f"option {option}: {word!r} is not allowed here")
        return word  # type: ignore[return-value]
    offsets = _per_queue_json(
        text,
        option,
        """'earliest', 'latest' or JSON like {"Topic": {"0": 12, "1": -2}}""",
        "offset",
        minimum=EARLIEST,
        range_text=">= 0, or -2 (earliest) or -1 (latest)",
    )
    flat = {o for queues in offsets.values() for o in queues.values()}
    if EARLIEST in flat and not allow_earliest:
        raise ConfigError(f"option {option}: -2 (earliest) is not allowed here")
    if LATEST in flat and not allow_latest:
        raise ConfigError(f"option {option}: -1 (latest) is not allowed here")
    return offsets


def parse_timestamps(text: str | None, option: str) -> Offsets | None:
    """Kafka's ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: a timestamp
    (ms since the epoch, matched against each message's storeTimestamp) per queue, as JSON
    ``{"Topic": {"0": 1700000000000}}``; None when absent."""
    if text is None:
        return None
    return _per_queue_json(
        text,
        option,
        'JSON like {"Topic": {"0": 1700000000000}} (ms since the epoch per queue)',
        "timestamp",
        minimum=0,
        range_text=">= 0 (ms since the epoch)",
    )


def _per_queue_json(
    text: str, option: str, expected: str, what: str, *, minimum: int, range_text: str
) -> Offsets:
    """A JSON object of topics, each an object of queue ids to integers in
    ``[minimum, 2**63)``: the shape offsets and timestamps share, checked entry by entry
    so that the error names the option, the topic and the queue."""
    try:
        data = json.loads(str(text).strip())
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"option {option} must be {expected}, not {text!r} ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"option {option}: the JSON must be an object of topics, not {text!r}")
    out: Offsets = {}
    for topic, queues in data.items():
        try:
            validate_topic(topic)
        except Exception as exc:
            raise ConfigError(f"option {option}: {exc}") from None
        if not isinstance(queues, dict):
            raise ConfigError(
                f"option {option}: topic {topic!r} must map to an object of queue ids, "
                f"not {queues!r}"
            )
        per: dict[int, int] = {}
        for qid, value in queues.items():
            if not re.fullmatch(r"\d{1,10}", qid) or int(qid) > MAX_QUEUE_ID:
                raise ConfigError(
                    f"option {option}: queue id {qid!r} of topic {topic} must be an integer "
                    f"in [0, {MAX_QUEUE_ID}]"
                )
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    f"option {option}: {what} {value!r} of {topic} queue {qid} must be an integer"
                )
            if not minimum <= value < 1 << 63:
                raise ConfigError(
                    f"option {option}: {what} {value} of {topic} queue {qid} must be {range_text}"
                )
            per[int(qid)] = value
        out[topic] = per
    return out


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The JSON form Spark checkpoints: string queue ids, sorted, so equal offsets compare
    equal as JSON text."""
    return {t: {str(q): int(o) for q, o in sorted(qs.items())} for t, qs in sorted(offsets.items())}


def offsets_from_json(data: object, what: str = "offset") -> Offsets:
    """Read back an offset dict that Spark kept in a checkpoint (or passed between calls)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {data!r} is not a JSON object of topics")
    out: Offsets = {}
    for topic, queues in data.items():
        if not isinstance(topic, str) or not isinstance(queues, dict):
            raise ConfigError(f"{what} {data!r}: topic {topic!r} must map to an object")
        per: dict[int, int] = {}
        for qid, offset in queues.items():
            if not re.fullmatch(r"\d{1,10}", str(qid)) or isinstance(offset, bool):
                raise ConfigError(f"{what} {data!r}: bad queue id {qid!r}")
            if not isinstance(offset, int) or offset < 0:
                raise ConfigError(f"{what} {data!r}: bad offset {offset!r} of queue {qid}")
            per[int(qid)] = offset
        out[topic] = per
    return out


def _subscription(opts: dict[str, str]) -> tuple[tuple[str, ...] | None, str | None]:
    given = [k for k in ("topic", "topics", "topicpattern") if opts.get(k) not in (None, "")]
    if len(given) != 1:
        raise ConfigError(
            "give exactly one of the options topic, topics (comma-separated) or topicPattern "
            f"(a regular expression); got {', '.join(given) or 'none'}"
        )
    key = given[0]
    if key == "topicpattern":
        pattern = opts[key]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option topicPattern {pattern!r} is not a regex: {exc}") from None
        return None, pattern
    names = [t.strip() for t in opts[key].split(",")] if key == "topics" else [opts[key].strip()]
    for name in names:
        try:
            validate_topic(name)
        except Exception as exc:
            raise ConfigError(f"option {key}: {exc}") from None
    return tuple(dict.fromkeys(names)), None


def _trigger_limits(opts: dict[str, str]) -> tuple[int | None, int | None, int]:
    """``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (ms),
    checked together: a minimum above the maximum could never be met, and a delay without a
    minimum would be silently ignored (Kafka ignores it; here it is refused)."""
    most = parse_int(opts.get("maxoffsetspertrigger"), "maxOffsetsPerTrigger", minimum=1)
    least = parse_int(opts.get("minoffsetspertrigger"), "minOffsetsPerTrigger", minimum=1)
    delay = parse_duration_ms(
        opts.get("maxtriggerdelay"), "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS
    )
    if least is not None and most is not None and least > most:
        raise ConfigError(
            f"option minOffsetsPerTrigger ({least}) must not exceed maxOffsetsPerTrigger ({most})"
        )
    if "maxtriggerdelay" in opts and least is None:
        raise ConfigError("option maxTriggerDelay only applies with option minOffsetsPerTrigger")
    return most, least, delay


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check every read option; ``streaming`` selects the stream defaults (start at latest,
    no ending offsets) as Spark's Kafka source does."""
    opts = _lower(options)
    _check_known(opts, READ_OPTIONS, "read")
    store = opts.get("store") or opts.get("path") or None
    namesrv = opts.get("namesrv") or None
    if store is None and namesrv is None:
        raise ConfigError(
            "give option store (the broker's storePathRootDir, on this host) or namesrv "
            "(host:port of the name server, to find the broker's store)"
        )
    transport = check_transport((opts.get("transport") or "auto").strip().lower())
    if transport == "tcp" and namesrv is None:
        raise ConfigError(
            "option transport=tcp reads through a broker: give option namesrv, not store"
        )
    topics, pattern = _subscription(opts)
    credentials, tls = parse_connection(opts)
    starting = parse_offsets(
        opts.get("startingoffsets"),
        "startingOffsets",
        default="latest" if streaming else "earliest",
        allow_latest=streaming,
    )
    for name in _STREAM_ONLY if not streaming else _BATCH_ONLY:
        if name.lower() in opts:
            kind = "streaming" if name in _STREAM_ONLY else "batch"
            raise ConfigError(f"option {name} is for {kind} queries only")
    ending = parse_offsets(
        opts.get("endingoffsets"), "endingOffsets", default="latest", allow_earliest=False
    )
    starting_by_timestamp = parse_timestamps(
        opts.get("startingoffsetsbytimestamp"), "startingOffsetsByTimestamp"
    )
    ending_by_timestamp = parse_timestamps(
        opts.get("endingoffsetsbytimestamp"), "endingOffsetsByTimestamp"
    )
    strategy = (opts.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            "option startingOffsetsByTimestampStrategy must be error or latest, not "
            f"{opts['startingoffsetsbytimestampstrategy']!r}"
        )
    max_per_trigger, min_per_trigger, max_delay = _trigger_limits(opts)
    for spec, name in (
        (starting, "startingOffsets"),
        (ending, "endingOffsets"),
        (starting_by_timestamp, "startingOffsetsByTimestamp"),
        (ending_by_timestamp, "endingOffsetsByTimestamp"),
    ):
        if isinstance(spec, dict) and topics is not None:
            extra = sorted(set(spec) - set(topics))
            if extra:
                raise ConfigError(
                    f"option {name} names topics that are not subscribed: {', '.join(extra)}"
                )
    return ReadOptions(
        store=store,
        namesrv=namesrv,
        broker=opts.get("broker") or None,
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        starting_timestamp=parse_int(opts.get("startingtimestamp"), "startingTimestamp", minimum=0),
        starting_by_timestamp=starting_by_timestamp,
        starting_timestamp_strategy=strategy,  # type: ignore[arg-type]
        ending_timestamp=parse_int(opts.get("endingtimestamp"), "endingTimestamp", minimum=0),
        ending_by_timestamp=ending_by_timestamp,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay,
        fail_on_data_loss=parse_bool(opts.get("failondataloss"), "failOnDataLoss", True),
        tags=parse_tags(opts.get("tags")),
        sql=parse_sql(opts.get("sql")),
        include_properties=parse_bool(opts.get("includeproperties"), "includeProperties", False),
        include_headers=parse_bool(opts.get("includeheaders"), "includeHeaders", False),
        max_rows_per_partition=parse_int(
            opts.get("maxrowsperpartition"), "maxRowsPerPartition", minimum=1
        )
        or DEFAULT_MAX_ROWS_PER_PARTITION,
        min_partitions=parse_int(
            opts.get("minpartitions"), "minPartitions", minimum=1, maximum=1 << 20
        ),
        transport=transport,
        credentials=credentials,
        tls=tls,
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check the write options: writes go through a producer, so ``namesrv`` is needed."""
    opts = _lower(options)
    _check_known(opts, WRITE_OPTIONS, "write")
    namesrv = opts.get("namesrv")
    if not namesrv:
        raise ConfigError("writing needs option namesrv (host:port of the name server)")
    topic = opts.get("topic") or None
    if topic is not None:
        try:
            validate_topic(topic)
        except Exception as exc:
            raise ConfigError(f"option topic: {exc}") from None
    credentials, tls = parse_connection(opts)
    exactly_once = parse_bool(opts.get("exactlyonce"), "exactlyOnce", False)
    job_id = opts.get("jobid") or None
    if job_id is not None and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", job_id):
        raise ConfigError(
            f"option jobId must be 1 to 128 letters, digits or _.:- characters, not {job_id!r}"
        )
    if job_id is not None and not exactly_once:
        raise ConfigError("option jobId is for exactlyOnce=true writes")
    timeout = opts.get("sendtimeout")
    send_timeout = 3.0
    if timeout is not None:
        try:
            send_timeout = float(timeout)
        except ValueError:
            raise ConfigError(f"option sendTimeout must be seconds, not {timeout!r}") from None
        if not 0 < send_timeout <= 3600:
            raise ConfigError(f"option sendTimeout must be in (0, 3600] seconds, not {timeout!r}")
    return WriteOptions(
        namesrv=namesrv,
        topic=topic,
        producer_group=opts.get("producergroup")
        or (DEFAULT_TRANSACTIONAL_GROUP if exactly_once else DEFAULT_PRODUCER_GROUP),
        send_timeout=send_timeout,
        write_batch_size=parse_int(
            opts.get("writebatchsize"), "writeBatchSize", minimum=1, maximum=1 << 20
        )
        or DEFAULT_WRITE_BATCH_SIZE,
        credentials=credentials,
        tls=tls,
        exactly_once=exactly_once,
        job_id=job_id,
    )
