"""Decode CommitLog records straight into Arrow columns, a batch at a time.

``rec.parse_at`` (the codec's kernel) decodes the headers of a whole run of records into a
``RECORD_ROW`` table; the kernels here then pull the property values (tags, keys, unique key, all
pairs, the user's pairs for Kafka's ``headers``) and build every column of a batch in a few
passes over that table (``row_columns``), into contiguous buffers that Arrow arrays wrap
without a copy or a Python call per row (a compressed body, sysFlag COMPRESSED, costs one:
it is decompressed). The Python -> JVM hand-off of the batches, not this, is most of a
Spark read's cost (``bench/spark_bench.py`` measures both against a source that decodes
nothing). Spark takes the resulting ``RecordBatch``\\ es as they are, so their types
must equal the Arrow form of the source's schema exactly (``int32`` for INT,
``timestamp[us, tz=UTC]``, ``list<element: string>``, a map with a non-null key).
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
from numba import njit

from shmq.body_compression import decompress_bodies
from shmq.codec import record as rec
from shmq.filter.sql92 import SqlFilter
from shmq.properties import RESERVED_PROPERTY_NAMES, decode_properties
from shmq.store.reader import rows_holding

log = logging.getLogger(__name__)

_SPACE = 32
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)

# Columns of the property table filled by ``scan_properties``.
P_TAGS, P_KEYS, P_UNIQ = 0, 2, 4  # each: start, length (-1: absent)
N_PROPS = 6

KEYS_TYPE = pa.list_(pa.field("element", pa.string()))
PROPERTIES_TYPE = pa.map_(pa.field("key", pa.string(), nullable=False), pa.string())
HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

BASE_FIELDS = [
    ("topic", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("commitLogOffset", pa.int64()),
    ("msgId", pa.string()),
    ("keys", KEYS_TYPE),
    ("tags", pa.string()),
    ("body", pa.binary()),
    ("bornTimestamp", TIMESTAMP_TYPE),
    ("storeTimestamp", TIMESTAMP_TYPE),
    ("reconsumeTimes", pa.int32()),
]


def arrow_schema(include_properties: bool, include_headers: bool = False) -> pa.Schema:
    """The Arrow form of ``source.read_schema`` with the same options."""
    fields = list(BASE_FIELDS)
    if include_properties:
        fields.append(("properties", PROPERTIES_TYPE))
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema([pa.field(n, t) for n, t in fields])


def _name_table(names: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """``names`` as one UTF-8 byte array and int64 offsets, for ``property_pairs``."""
    raw = [n.encode() for n in sorted(names)]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in raw])
    return np.frombuffer(b"".join(raw), dtype=np.uint8).copy(), offsets


# Headers are the user's properties: RocketMQ's system names (MessageConst) are left out.
_NO_NAMES = _name_table(frozenset())
_SYSTEM_NAMES = _name_table(RESERVED_PROPERTY_NAMES)


_TAGS, _KEYS, _UNIQ = rec.PROP_TAGS, rec.PROP_KEYS, rec.PROP_UNIQ_KEY


@njit(cache=True, nogil=True)
def scan_properties(buf, rows, tags_name, keys_name, uniq_name, out):
    """Spans of the TAGS, KEYS and UNIQ_KEY values of each row's properties (start, length;
    length -1 when absent). Pairs follow ``properties.decode_properties``: a pair needs a
    non-empty name and value, and a later pair of the same name wins."""
    for i in range(rows.shape[0]):
        for c in range(0, N_PROPS, 2):
            out[i, c] = 0
            out[i, c + 1] = -1
        s = rows[i].props_start
        end = s + rows[i].props_len
        while s < end:
            stop, sep = rec.property_pair(buf, s, end)
            if s < sep < stop - 1:
                col = -1
                if rec.bytes_equal(buf, s, sep, tags_name):
                    col = P_TAGS
                elif rec.bytes_equal(buf, s, sep, keys_name):
                    col = P_KEYS
                elif rec.bytes_equal(buf, s, sep, uniq_name):
                    col = P_UNIQ
                if col >= 0:
                    out[i, col] = sep + 1
                    out[i, col + 1] = stop - sep - 1
            s = stop + 1


@njit(cache=True, nogil=True)
def gather(buf, starts, lengths):
    """Copy spans (length -1: null, copied as empty) into one buffer with int32 offsets."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        if lengths[i] > 0:
            total += lengths[i]
        offsets[i + 1] = total
    data = np.empty(total, dtype=np.uint8)
    d = 0
    for i in range(n):  # a slice copy: 3-4x the byte loop's speed, even for 5-byte tags
        s = starts[i]
        m = offsets[i + 1] - offsets[i]
        data[d : d + m] = buf[s : s + m]
        d += m
    return data, offsets


@njit(cache=True, nogil=True, inline="always")
def _id_length(rows, props, i):
    """The length of row ``i``'s message id (see ``row_columns``)."""
    if props[i, P_UNIQ + 1] > 0:
        return props[i, P_UNIQ + 1]
    return 56 if rows[i].sysflag & rec.SYSFLAG_STOREHOST_V6 else 32


@njit(cache=True, nogil=True)
def row_columns(buf, rows, props, hexdigits, fixed, offsets):
    """The per-row columns of a batch in two passes over ``rows``, whatever the batch holds:
    the first fills the fixed-width columns (``fixed``: queueId, queueOffset,
    commitLogOffset, born and store time in µs, reconsumeTimes) and the int32 ``offsets``
    (rows 0, 1, 2: message id, tags, body) and returns whether any body is compressed; the
    second copies the ids, tags and bodies into one byte buffer each. A message id is what
    RocketMQ clients show: the producer's UNIQ_KEY when the message has one, else the offset
    message id (store host + physical offset in hex)."""
    n = rows.shape[0]
    offsets[:, 0] = 0
    ids = tags = bodies = 0
    compressed = False
    for i in range(n):
        r = rows[i]
        fixed[0, i] = r.queue_id
        fixed[1, i] = r.queue_offset
        fixed[2, i] = r.phys_offset
        fixed[3, i] = r.born_ts * 1000
        fixed[4, i] = r.store_ts * 1000
        fixed[5, i] = r.reconsume_times
        compressed |= (r.sysflag & rec.SYSFLAG_COMPRESSED) != 0
        ids += _id_length(rows, props, i)
        tags += max(props[i, P_TAGS + 1], 0)
        bodies += r.body_len
        offsets[0, i + 1] = ids
        offsets[1, i + 1] = tags
        offsets[2, i + 1] = bodies
    id_data = np.empty(ids, dtype=np.uint8)
    tag_data = np.empty(tags, dtype=np.uint8)
    body_data = np.empty(bodies, dtype=np.uint8)
    for i in range(n):
        d = offsets[1, i]
        m = offsets[1, i + 1] - d
        s = props[i, P_TAGS]
        tag_data[d : d + m] = buf[s : s + m]
        d = offsets[2, i]
        m = offsets[2, i + 1] - d
        s = rows[i].body_start
        body_data[d : d + m] = buf[s : s + m]
        d = np.int64(offsets[0, i])
        m = props[i, P_UNIQ + 1]
        if m > 0:
            s = props[i, P_UNIQ]
            id_data[d : d + m] = buf[s : s + m]
            continue
        host = rows[i].store_host
        for k in range((offsets[0, i + 1] - offsets[0, i]) // 2 - 8):
            b = buf[host + k]
            id_data[d] = hexdigits[b >> 4]
            id_data[d + 1] = hexdigits[b & 15]
            d += 2
        phys = rows[i].phys_offset
        for k in range(15, -1, -1):
            id_data[d + k] = hexdigits[phys & 15]
            phys >>= 4
    return compressed, id_data, tag_data, body_data


@njit(cache=True, nogil=True)
def split_keys(buf, props):
    """KEYS values split on spaces (empty pieces dropped, as ``MessageExt.keys``): list
    offsets per row, string offsets and bytes."""
    n = props.shape[0]
    list_offsets = np.empty(n + 1, dtype=np.int32)
    list_offsets[0] = 0
    count = 0
    nbytes = 0
    for i in range(n):
        s = props[i, P_KEYS]
        e = s + props[i, P_KEYS + 1]
        inside = False
        for p in range(s, e):
            if buf[p] == _SPACE:
                inside = False
            else:
                nbytes += 1
                if not inside:
                    count += 1
                    inside = True
        list_offsets[i + 1] = count
    str_offsets = np.empty(count + 1, dtype=np.int32)
    str_offsets[0] = 0
    data = np.empty(nbytes, dtype=np.uint8)
    j = 0
    d = 0
    for i in range(n):
        s = props[i, P_KEYS]
        e = s + props[i, P_KEYS + 1]
        inside = False
        for p in range(s, e):
            if buf[p] == _SPACE:
                if inside:
                    j += 1
                    str_offsets[j] = d
                inside = False
            else:
                data[d] = buf[p]
                d += 1
                inside = True
        if inside:
            j += 1
            str_offsets[j] = d
    return list_offsets, str_offsets, data


@njit(cache=True, nogil=True, inline="always")
def _listed(buf, s, e, names, name_offsets):
    for k in range(name_offsets.shape[0] - 1):
        if rec.bytes_equal(buf, s, e, names[name_offsets[k] : name_offsets[k + 1]]):
            return True
    return False


@njit(cache=True, nogil=True)
def property_pairs(buf, rows, skip, skip_offsets):
    """Every (name, value) pair of each row's properties, by ``decode_properties``' rules
    (duplicate names are kept in order; Spark sees the map as stored), except pairs whose
    name is one of ``skip`` (a name table of ``_name_table``)."""
    n = rows.shape[0]
    map_offsets = np.empty(n + 1, dtype=np.int32)
    map_offsets[0] = 0
    count = 0
    for i in range(n):
        s = rows[i].props_start
        end = s + rows[i].props_len
        while s < end:
            stop, sep = rec.property_pair(buf, s, end)
            if s < sep < stop - 1 and not _listed(buf, s, sep, skip, skip_offsets):
                count += 1
            s = stop + 1
        map_offsets[i + 1] = count
    spans = np.empty((count, 4), dtype=np.int64)
    j = 0
    for i in range(n):
        s = rows[i].props_start
        end = s + rows[i].props_len
        while s < end:
            stop, sep = rec.property_pair(buf, s, end)
            if s < sep < stop - 1 and not _listed(buf, s, sep, skip, skip_offsets):
                spans[j, 0] = s
                spans[j, 1] = sep - s
                spans[j, 2] = sep + 1
                spans[j, 3] = stop - sep - 1
                j += 1
            s = stop + 1
    return map_offsets, spans


def _strings(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    n = offsets.shape[0] - 1
    mask = (
        None
        if valid is None or valid.all()
        else pa.py_buffer(np.packbits(valid, bitorder="little"))
    )
    return pa.Array.from_buffers(pa.string(), n, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])


def _binary(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    n = offsets.shape[0] - 1
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _list(type_: pa.DataType, offsets: np.ndarray, values: pa.Array, nulls: bool) -> pa.Array:
    """A list array over ``values`` without copying ``offsets``; with ``nulls``, an empty
    list is null (as Kafka's source gives a record without headers)."""
    n = offsets.shape[0] - 1
    mask = None
    if nulls:
        valid = offsets[1:] != offsets[:-1]
        mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(type_, n, [mask, pa.py_buffer(offsets)], children=[values])


def _fixed(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(type_, values.shape[0], [None, pa.py_buffer(values)])


def record_batch(
    buf: np.ndarray, rows: np.ndarray, topic: str, schema: pa.Schema
) -> pa.RecordBatch:
    """The Arrow form of decoded ``rows`` (all of one topic) whose positions are in ``buf``."""
    n = rows.shape[0]
    props = np.empty((n, N_PROPS), dtype=np.int64)
    scan_properties(buf, rows, _TAGS, _KEYS, _UNIQ, props)
    raw_topic = np.frombuffer(topic.encode(), dtype=np.uint8)
    topic_data = np.tile(raw_topic, n)
    topic_offsets = (np.arange(n + 1, dtype=np.int64) * raw_topic.shape[0]).astype(np.int32)
    fixed = np.empty((6, n), dtype=np.int64)
    offsets = np.empty((3, n + 1), dtype=np.int32)
    compressed, ids_data, tags_data, body_data = row_columns(buf, rows, props, _HEX, fixed,
                                                             offsets)  # fmt: skip
    body_offsets = offsets[2]
    if compressed:
        body_data, body_offsets, errors = decompress_bodies(
            body_data, body_offsets, rows["sysflag"], f"topic {topic}"
        )
        for i, exc in errors.items():  # a row cannot carry an error: its body stays as stored
            log.warning("queue %d offset %d: %s", fixed[0, i], fixed[1, i], exc)
    list_offsets, key_offsets, key_data = split_keys(buf, props)
    keys = _list(KEYS_TYPE, list_offsets, _strings(key_data, key_offsets), False)
    columns = [
        _strings(topic_data, topic_offsets),
        _fixed(fixed[0].astype(np.int32), pa.int32()),
        _fixed(fixed[1], pa.int64()),
        _fixed(fixed[2], pa.int64()),
        _strings(ids_data, offsets[0]),
        keys,
        _strings(tags_data, offsets[1], props[:, P_TAGS + 1] >= 0),
        _binary(body_data, body_offsets),
        _fixed(fixed[3], TIMESTAMP_TYPE),
        _fixed(fixed[4], TIMESTAMP_TYPE),
        _fixed(fixed[5].astype(np.int32), pa.int32()),
    ]
    if "properties" in schema.names:
        map_offsets, spans = property_pairs(buf, rows, *_NO_NAMES)
        names = _strings(*gather(buf, spans[:, 0], spans[:, 1]))
        values = _strings(*gather(buf, spans[:, 2], spans[:, 3]))
        columns.append(
            pa.MapArray.from_arrays(pa.array(map_offsets), names, values, type=PROPERTIES_TYPE)
        )
    if "headers" in schema.names:
        list_offsets, spans = property_pairs(buf, rows, *_SYSTEM_NAMES)
        pairs = pa.StructArray.from_arrays(
            [
                _strings(*gather(buf, spans[:, 0], spans[:, 1])),
                _binary(*gather(buf, spans[:, 2], spans[:, 3])),
            ],
            fields=list(HEADER_TYPE),
        )
        columns.append(_list(HEADERS_TYPE, list_offsets, pairs, True))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def sql_matched(buf: np.ndarray, rows: np.ndarray, sql: SqlFilter | None) -> np.ndarray:
    """The ``rows`` (RECORD_ROWs of ``buf``) whose properties, TAGS included, ``sql``
    matches (all of them without a filter). RocketMQ evaluates a SQL92 filter on a map of
    each message's properties; so does this, one dict per record."""
    if sql is None:
        return rows
    rows = rows[rows_holding(buf, rows, sql.required)]  # what cannot match, undecoded
    spans = zip(rows["props_start"].tolist(), rows["props_len"].tolist(), strict=True)
    keep = np.fromiter(
        (sql(decode_properties(bytes(buf[s : s + n]))) for s, n in spans),
        dtype=np.bool_,
        count=rows.shape[0],
    )
    return np.ascontiguousarray(rows[keep])
