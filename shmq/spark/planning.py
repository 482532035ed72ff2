"""Offset arithmetic of the Spark source, as pure functions over plain dicts.

Kept apart from Spark and from the store so that the rules (which offset a spec means,
how a trigger's budget is shared, how ranges are split) are easy to read and to fuzz.
Queues are ``(topic, queue id)`` pairs; offsets are per-queue ints, the end exclusive.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shmq.errors import ConfigError, DataLossError
from shmq.spark.options import EARLIEST, LATEST, Offsets, OffsetSpec

log = logging.getLogger(__name__)

Queue = tuple[str, int]
Bounds = Mapping[Queue, tuple[int, int]]  # queue -> (min offset, max offset)


@dataclass(frozen=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: one Spark input partition."""

    topic: str
    queue_id: int
    start: int
    end: int


def flatten(offsets: Offsets) -> dict[Queue, int]:
    return {(t, q): o for t, qs in offsets.items() for q, o in qs.items()}


def nest(flat: Mapping[Queue, int]) -> Offsets:
    out: Offsets = {}
    for (topic, qid), offset in sorted(flat.items()):
        out.setdefault(topic, {})[qid] = offset
    return out


def resolve(
    spec: OffsetSpec, bounds: Bounds, *, default: int, pinned: Mapping[Queue, int] | None = None
) -> dict[Queue, int]:
    """Concrete offsets for every queue of ``bounds``: ``spec`` ("earliest", "latest" or
    per-queue JSON with -2/-1; ``default`` (EARLIEST or LATEST) for queues it leaves out),
    except the queues of ``pinned`` (offsets found by timestamp), which win, as Kafka's
    timestamp options win over ``startingOffsets`` / ``endingOffsets``."""
    flat = flatten(spec) if isinstance(spec, dict) else {}
    pinned = pinned or {}
    out: dict[Queue, int] = {}
    for queue, (low, high) in bounds.items():
        if queue in pinned:
            out[queue] = pinned[queue]
            continue
        if spec == "earliest":
            wanted = EARLIEST
        elif spec == "latest":
            wanted = LATEST
        else:
            wanted = flat.get(queue, default)
        out[queue] = low if wanted == EARLIEST else high if wanted == LATEST else wanted
    return out


def queue_timestamps(
    queues: Iterable[Queue], timestamp: int | None, per_queue: Offsets | None
) -> dict[Queue, int]:
    """The timestamp to look up for each of ``queues``: ``timestamp`` for all of them (a
    global ``startingTimestamp`` / ``endingTimestamp`` wins over the per-queue JSON, as in
    Kafka), else the ones ``per_queue`` names; the others keep their offset options."""
    if timestamp is not None:
        return dict.fromkeys(queues, timestamp)
    flat = flatten(per_queue or {})
    return {q: flat[q] for q in queues if q in flat}


def check_start(queue: Queue, start: int, low: int, fail_on_data_loss: bool, why: str = "") -> int:
    """``start`` if it is still stored; below the queue's min offset (cleanup deleted it),
    fail or, with failOnDataLoss=false, warn and go on from the min offset."""
    if start >= low:
        return start
    topic, qid = queue
    message = (
        f"{topic} queue {qid}: offsets [{start}, {low}) are no longer in the store (its min "
        f"offset is {low}{why}); they were deleted by cleanup before this query read them"
    )
    if fail_on_data_loss:
        raise DataLossError(
            message + ". Set option failOnDataLoss=false to skip them with a warning"
        )
    log.warning("%s; skipped (failOnDataLoss=false)", message)
    return low


def batch_ranges(
    starts: Mapping[Queue, int],
    ends: Mapping[Queue, int],
    bounds: Bounds,
    fail_on_data_loss: bool,
    explicit_start: Iterable[Queue] = (),
) -> list[QueueRange]:
    """Ranges of a batch query. A start above its end is a user error; a start below the
    min offset is data loss. Ends beyond the max offset are cut to it."""
    explicit = set(explicit_start)
    out = []
    for queue in sorted(bounds):
        low, high = bounds[queue]
        start, end = starts[queue], min(ends[queue], high)
        if start > end:
            topic, qid = queue
            raise ConfigError(
                f"{topic} queue {qid}: starting offset {start} is after ending offset {end} "
                f"(by the starting and ending offset or timestamp options; max offset {high})"
            )
        if queue in explicit:
            start = check_start(queue, start, low, fail_on_data_loss)
        else:
            start = max(start, low)
        if end > start:
            out.append(QueueRange(queue[0], queue[1], start, end))
    return out


def split(
    ranges: list[QueueRange], max_rows: int, min_partitions: int | None = None
) -> list[QueueRange]:
    """Cut ranges into pieces of at most ``max_rows`` offsets, and into at least
    ``min_partitions`` pieces when there are that many offsets, in order; pieces of one
    range are near equal."""
    total = sum(r.end - r.start for r in ranges)
    limit = max_rows
    if min_partitions and total:
        limit = max(1, min(limit, total // min_partitions))
    out = []
    for r in ranges:
        n = r.end - r.start
        pieces = max(1, math.ceil(n / limit))
        for i in range(pieces):
            a = r.start + n * i // pieces
            b = r.start + n * (i + 1) // pieces
            if b > a:
                out.append(QueueRange(r.topic, r.queue_id, a, b))
    return out


def cap(start: Mapping[Queue, int], latest: Mapping[Queue, int], max_rows: int) -> dict[Queue, int]:
    """End offsets that admit at most ``max_rows`` new offsets, shared in proportion to each
    queue's lag (largest remainders first, ties by queue), as Kafka's
    ``maxOffsetsPerTrigger``. Queues missing from ``start`` start at 0."""
    lag = lags(start, latest)
    total = sum(lag.values())
    if total <= max_rows:
        return dict(latest)
    share = {q: lag[q] * max_rows // total for q in lag}
    left = max_rows - sum(share.values())
    order = sorted(lag, key=lambda q: (-(lag[q] * max_rows % total), q))
    for q in order[:left]:
        share[q] += 1
    return {q: (start.get(q, 0) + share[q] if lag[q] else latest[q]) for q in latest}


def lags(start: Mapping[Queue, int], latest: Mapping[Queue, int]) -> dict[Queue, int]:
    """Offsets each queue of ``latest`` has that ``start`` has not read (0 at least; queues
    missing from ``start`` start at 0)."""
    return {q: max(0, latest[q] - start.get(q, 0)) for q in latest}


def holds(new_rows: int, min_rows: int | None, waited_ms: float, max_delay_ms: int) -> bool:
    """Whether a trigger waits for more rows instead of starting a micro-batch now, as
    Kafka's ``minOffsetsPerTrigger``: fewer than ``min_rows`` new rows and less than
    ``maxTriggerDelay`` since the last micro-batch. Spark has no ReadLimit that carries both
    a minimum and a maximum, so the source applies this itself."""
    return min_rows is not None and new_rows < min_rows and waited_ms < max_delay_ms
