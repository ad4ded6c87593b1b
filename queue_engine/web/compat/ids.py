"""The external id of a job under ``--compat dataloader``: a UUID that encodes its bigint id.

dataloader's clients hold ``job_id`` as a UUID string (its ``dl_jobs.job_id``
was a random UUID). The engine's ids are bigints, so every job gets a stable
UUID computed from its id, and decoded back by the routes: RFC 9562
version 8 (the "custom" layout), laid out as

======  ======  =================================================
bits    width   content
======  ======  =================================================
0-47    48      :data:`MARKER`, ASCII ``qengin``: ``71656e67-696e``
48-51   4       the version, 8
52-63   12      bit 62 of the id (the rest zero)
64-65   2       the variant, ``10``
66-127  62      bits 0-61 of the id
======  ======  =================================================

so job 42 is ``71656e67-696e-8000-8000-00000000002a``. Why computed, not
stored: a stored UUID would be a column and an index written by every enqueue
(the hot path) for the few clients that speak dataloader; this costs nothing
until a compatibility route is called, and two servers, a restart or a
re-import always give the same answer. What it gives up: dataloader's ids were
random, these are sequential like the native API's integer ids (dataloader
had no authentication, so nothing relied on them being unguessable).

The marker tells these ids from any other UUID: a dataloader id (version 4)
or a foreign version-8 UUID never decodes to a job here; an imported job's old
id is answered through ``imported_ids`` instead
(:mod:`queue_engine.web.compat.dataloader`).
"""

from __future__ import annotations

import uuid

#: The first 48 bits of every job UUID: ``qengin`` in ASCII.
MARKER = 0x71656E67696E
VERSION = 8
#: The largest job id (Postgres bigint).
ID_MAX = 2**63 - 1
_LOW_BITS = 62
_LOW_MASK = (1 << _LOW_BITS) - 1


def job_uuid(job_id: int) -> uuid.UUID:
    """The UUID of job ``job_id`` (1 to 2^63-1); a ValueError outside that range."""
    if not 1 <= job_id <= ID_MAX:
        raise ValueError(f"a job id is 1 to 2^63-1, got {job_id}")
    value = (
        (MARKER << 80)
        | (VERSION << 76)
        | ((job_id >> _LOW_BITS) << 64)
        | (0b10 << 62)
        | (job_id & _LOW_MASK)
    )
    return uuid.UUID(int=value)


def job_id_of(value: uuid.UUID) -> int | None:
    """The job id a UUID of :func:`job_uuid` encodes; None for any other UUID."""
    bits = value.int
    if bits >> 80 != MARKER or (bits >> 76) & 0xF != VERSION or (bits >> 62) & 0b11 != 0b10:
        return None
    high = (bits >> 64) & 0xFFF
    if high > 1:
        return None
    job_id = (high << _LOW_BITS) | (bits & _LOW_MASK)
    return job_id if job_id >= 1 else None
