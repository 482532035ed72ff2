"""RocketMQ 4.9's HA wire format (``HAConnection`` / ``HAService.HAClient``), big-endian.

- slave → master: 8-byte reports, each the slave's CommitLog max offset (int64); the master
  acts on the last complete one of what it read;
- master → slave: a 12-byte header, the physical offset of the first byte (int64) and the
  body size (int32), then that many raw CommitLog bytes. A body size of 0 is a heartbeat.

These are the only parsers of bytes from the other side of an HA connection, so they check
everything a peer could get wrong (negative values, a body larger than the batch limit) and
say what was wrong; a caller ends the connection on an ``HAFrameError``.
"""

from __future__ import annotations

import struct

from shmq.errors import HAFrameError

HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size  # 12
REPORT = struct.Struct(">q")
REPORT_SIZE = REPORT.size  # 8


def pack_header(phy_offset: int, body_size: int) -> bytes:
    return HEADER.pack(phy_offset, body_size)


def pack_report(max_offset: int) -> bytes:
    return REPORT.pack(max_offset)


def parse_header(buf: bytes | bytearray | memoryview, pos: int, max_body: int) -> tuple[int, int]:
    """``(phy offset, body size)`` of the header at ``buf[pos:]`` (12 bytes must be there);
    ``HAFrameError`` when either is negative or the body exceeds ``max_body`` (a peer that
    does not speak this protocol, or a stream that lost its framing)."""
    offset, size = HEADER.unpack_from(buf, pos)
    if offset < 0:
        raise HAFrameError(f"HA transfer header with a negative offset {offset}")
    if not 0 <= size <= max_body:
        raise HAFrameError(f"HA transfer header with a body of {size} bytes; at most {max_body}")
    return offset, size


def last_report(buf: bytes | bytearray | memoryview, length: int) -> tuple[int, int]:
    """``(offset, bytes used)`` of the last complete 8-byte report in ``buf[:length]``
    (offset -1 when there is none); the bytes after the used ones are a partial report to
    keep. A negative offset is an ``HAFrameError``."""
    used = length - length % REPORT_SIZE
    if used == 0:
        return -1, 0
    (offset,) = REPORT.unpack_from(buf, used - REPORT_SIZE)
    if offset < 0:
        raise HAFrameError(f"HA slave reported a negative offset {offset}")
    return offset, used
