"""Schedule expressions: cron (5 or 6 fields), ``@daily``-style macros and ``every 30s`` intervals.

Cron matching is delegated to `cronsim <https://pypi.org/project/cronsim/>`_
(the parser behind healthchecks.io, Debian-cron compatible, with an optional
leading seconds field); this module adds what a distributed scheduler needs on
top of it:

- errors that name the bad field (``month field '13' out of range 1-12``), so a
  typo is refused at ``queue-ctl schedules add`` or at import of the app module;
- one explicit, documented time-zone rule that holds for 5- and 6-field
  expressions alike (cronsim applies Debian's DST rule to 5-field expressions
  only):

  * an expression whose **hour field is** ``*`` follows elapsed time: it fires
    at every real instant whose local time matches, so ``*/5 * * * *`` keeps
    firing every 5 real minutes through a DST change, never twice in a row
    and with no hole;
  * any other expression names **wall-clock times**, and each wall-clock slot
    fires at most once: a slot that does not exist on a spring-forward day
    (02:30 in Europe/Berlin) fires once at the first valid instant after the
    gap (03:00 local, the moment the clocks jump), and a slot that occurs twice
    on a fall-back day (02:30 in Europe/Berlin) fires once, at its first
    occurrence (summer time);

- intervals (``every 30s``, ``every 5m``, ``every 2h``) aligned to the Unix
  epoch in UTC, so every scheduler computes the same slots without talking to
  the others and slot *n* is exactly ``first + n * interval``: no drift.

Everything here is pure (no clock, no database) so the slot arithmetic is
tested with a virtual clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from queue_engine.foundation.errors import ValidationError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The longest DST shift in the tz database is 2 h (plus margin): a naive local
#: time is searched this far either side of an instant to find its neighbours.
_DST_MARGIN = timedelta(hours=3)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

INTERVAL = re.compile(
    r"^every\s+(?P<n>\d+)\s*(?P<unit>s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)$"
)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
MAX_INTERVAL_S = 7 * 24 * 3600

FIELDS_5 = ("minute", "hour", "day-of-month", "month", "day-of-week")
FIELDS_6 = ("second", *FIELDS_5)
RANGES = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
}
NAMES = {
    "month": ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
    "day-of-week": ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
}


def check_timezone(tz: str) -> ZoneInfo:
    """Return the IANA time zone, or refuse an unknown name with a one-line error."""
    try:
        return _zone(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValidationError(
            f"unknown time zone {tz!r}: use an IANA name such as 'UTC', 'Europe/Berlin' "
            "or 'America/New_York'"
        ) from None


@lru_cache(maxsize=256)
def _zone(tz: str) -> ZoneInfo:
    if not isinstance(tz, str) or not tz or tz != tz.strip():
        raise ValueError(tz)
    return ZoneInfo(tz)


def _explain_field(name: str, text: str) -> str:
    """Say what is wrong with one cron field that cronsim refused."""
    low, high = RANGES[name]
    names = NAMES.get(name, [])
    for term in text.upper().split(","):
        base, _, step = term.partition("/")
        if "/" in term and (not step.isdigit() or int(step) == 0):
            return f"{name} field {text!r}: step '/{step}' must be a whole number of at least 1"
        for value in base.split("-") if base not in ("*", "L", "LW") else []:
            value = value.split("#")[0].rstrip("L") or value
            if value.isdigit():
                if not low <= int(value) <= high:
                    return f"{name} field {text!r} out of range {low}-{high}"
            elif value not in names:
                allowed = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
                return f"{name} field {text!r} is not valid: use {allowed}, *, a-b, a,b or /step"
        bounds = base.split("-")
        if (
            len(bounds) == 2
            and all(b.isdigit() for b in bounds)
            and int(bounds[0]) > int(bounds[1])
        ):
            return f"{name} field {text!r}: range {base} runs backwards"
    if name == "day-of-month":
        return f"{name} field {text!r} never matches in the months allowed by the month field"
    return f"{name} field {text!r} is not valid"


@dataclass(frozen=True, slots=True)
class Trigger:
    """A parsed schedule expression in a time zone; computes slots as aware datetimes.

    Slots come out in the schedule's time zone (so a handler sees local time).
    Compare them after ``.astimezone(UTC)``: Python compares two datetimes that
    share a tzinfo by wall clock, ignoring ``fold``, which misorders the
    repeated hour of a fall-back day.
    """

    expression: str
    tz: str
    cron: str | None  # normalised cron text, None for an interval
    interval: timedelta | None
    wall_clock: bool  # see the module docstring: hour field other than "*"

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return _zone(self.tz)

    # -- single steps -------------------------------------------------------

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after ``t`` (None if the expression never fires again)."""
        return next(self.iter_after(t), None)

    def prev_before(self, t: datetime) -> datetime | None:
        """The last slot strictly before ``t``."""
        return next(self.iter_before(t), None)

    # -- iteration ------------------------------------------------------------

    def iter_after(self, t: datetime) -> Iterator[datetime]:
        """Slots strictly after ``t``, in order."""
        _check_aware(t)
        if self.interval is not None:
            step = self.interval
            slot = EPOCH + ((t - EPOCH) // step + 1) * step
            while True:
                yield slot.astimezone(self.zone)
                slot += step
        assert self.cron is not None
        if not self.wall_clock:
            yield from _cronsim(self.cron, t.astimezone(self.zone))
            return
        # Compare in UTC: aware datetimes sharing a tzinfo compare by wall clock,
        # ignoring fold, which is wrong in the repeated hour.
        last = t.astimezone(UTC)
        start = t.astimezone(self.zone).replace(tzinfo=None) - _DST_MARGIN
        for local in _cronsim(self.cron, start):
            slot = self._place(local)
            if slot.astimezone(UTC) > last:  # drops slots before t and gap slots folded together
                last = slot.astimezone(UTC)
                yield slot

    def iter_before(self, t: datetime) -> Iterator[datetime]:
        """Slots strictly before ``t``, newest first."""
        _check_aware(t)
        if self.interval is not None:
            step = self.interval
            slot = EPOCH - (-(t - EPOCH) // step + 1) * step  # the last multiple < t
            while True:
                yield slot.astimezone(self.zone)
                slot -= step
        assert self.cron is not None
        if not self.wall_clock:
            yield from _cronsim(self.cron, t.astimezone(self.zone), reverse=True)
            return
        last = t.astimezone(UTC)
        start = t.astimezone(self.zone).replace(tzinfo=None) + _DST_MARGIN
        for local in _cronsim(self.cron, start, reverse=True):
            slot = self._place(local)
            if slot.astimezone(UTC) < last:
                last = slot.astimezone(UTC)
                yield slot

    def between(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """Slots ``s`` with ``after < s <= until``, oldest first, at most ``limit`` of them."""
        out: list[datetime] = []
        until = until.astimezone(UTC)
        for slot in self.iter_after(after):
            if slot.astimezone(UTC) > until or (limit is not None and len(out) >= limit):
                break
            out.append(slot)
        return out

    # -- wall-clock placement -------------------------------------------------

    def _place(self, local: datetime) -> datetime:
        """Map a naive local wall-clock slot to its instant (the DST rule of the module doc)."""
        zone = self.zone
        first = local.replace(tzinfo=zone, fold=0)
        second = local.replace(tzinfo=zone, fold=1)
        if first.utcoffset() == second.utcoffset():
            return first  # an ordinary time
        as_utc = first.astimezone(UTC)
        if as_utc.astimezone(zone).replace(tzinfo=None) == local:
            return first  # ambiguous (fall-back): the first occurrence
        # Nonexistent (spring-forward gap): the instant the clocks jump. zoneinfo
        # reads a gap time with the offset before (fold=0) or after (fold=1) the
        # change; the transition lies between the two readings: bisect on seconds.
        lo, hi = sorted((int(second.timestamp()), int(as_utc.timestamp())))
        before = datetime.fromtimestamp(lo, UTC).astimezone(zone).utcoffset()
        while hi - lo > 1:  # tz database transitions fall on whole seconds
            mid = (lo + hi) // 2
            if datetime.fromtimestamp(mid, UTC).astimezone(zone).utcoffset() == before:
                lo = mid
            else:
                hi = mid
        return datetime.fromtimestamp(hi, UTC).astimezone(zone)


def _cronsim(expr: str, start: datetime, reverse: bool = False) -> Iterator[datetime]:
    try:
        yield from CronSim(expr, start, reverse=reverse)
    except StopIteration:  # pragma: no cover - cronsim gives up after 50 years
        return


def _check_aware(t: datetime) -> None:
    if t.tzinfo is None:
        raise ValueError("slot arithmetic needs timezone-aware datetimes")


def parse(expression: str, tz: str = "UTC") -> Trigger:
    """Validate an expression and a time zone; raise ValidationError naming the bad part."""
    check_timezone(tz)
    return _parse(expression, tz)


@lru_cache(maxsize=1024)
def _parse(expression: str, tz: str) -> Trigger:
    if not isinstance(expression, str) or not expression.strip():
        raise ValidationError("empty schedule expression: give a cron expression or 'every 30s'")
    text = " ".join(expression.split())
    lowered = text.lower()
    if lowered.startswith("every"):
        match = INTERVAL.match(lowered)
        if match is None:
            raise ValidationError(
                f"invalid interval {expression!r}: use 'every N' with a unit s, m or h, "
                "e.g. 'every 30s', 'every 5m', 'every 2h'"
            )
        seconds = int(match["n"]) * UNIT_SECONDS[match["unit"][0]]
        if not 1 <= seconds <= MAX_INTERVAL_S:
            raise ValidationError(
                f"invalid interval {expression!r}: must be between 1 second and 7 days"
            )
        return Trigger(text, tz, None, timedelta(seconds=seconds), wall_clock=False)
    if text.startswith("@"):
        macro = MACROS.get(lowered)
        if macro is None:
            raise ValidationError(
                f"invalid cron expression {expression!r}: unknown macro; known: {', '.join(MACROS)}"
            )
        text = macro
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise ValidationError(
            f"invalid cron expression {expression!r}: expected 5 fields "
            "(minute hour day-of-month month day-of-week) or 6 with a leading second field, "
            f"got {len(fields)}"
        )
    names = FIELDS_5 if len(fields) == 5 else FIELDS_6
    # Check field by field (the others wildcards) so the error names the field.
    for index, (name, value) in enumerate(zip(names, fields, strict=True)):
        probe = ["*"] * len(fields)
        probe[index] = value
        try:
            CronSim(" ".join(probe), EPOCH)
        except CronSimError:
            raise ValidationError(
                f"invalid cron expression {expression!r}: {_explain_field(name, value)}"
            ) from None
    try:
        CronSim(text, EPOCH)
    except CronSimError as exc:
        detail = str(exc)
        name = detail.removeprefix("Bad ").strip()
        if name in RANGES:
            value = fields[names.index(name)]
            detail = _explain_field(name, value)
        raise ValidationError(f"invalid cron expression {expression!r}: {detail}") from None
    hour = fields[names.index("hour")]
    trigger = Trigger(text, tz, text, None, wall_clock=hour != "*")
    if trigger.next_after(EPOCH) is None:  # pragma: no cover - refused above in practice
        raise ValidationError(f"invalid cron expression {expression!r}: it never fires")
    return trigger
