"""Worker recycling: the rule (:func:`decide`), the spread, and the recycler's counters.

No database and no waiting: the clock, the RSS probe and the random source
are injected. The worker process itself is tested in
``tests/process/test_worker_recycle.py``.
"""

from __future__ import annotations

import pytest
from support.timing import FakeTiming

from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.worker.recycle import (
    RECYCLE_SPREAD,
    Recycle,
    RecycleLimits,
    Recycler,
    decide,
    process_rss_mb,
)


class FakeRss:
    """An RSS probe returning ``value`` MiB and counting its calls."""

    def __init__(self, value: float | None) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> float | None:
        self.calls += 1
        return self.value


def recycler(
    limits: RecycleLimits,
    *,
    clock: FakeTiming | None = None,
    rss: FakeRss | None = None,
    rand: float = 0.0,
) -> Recycler:
    return Recycler(
        limits,
        clock=clock or FakeTiming(100.0),
        rss_mb=rss or FakeRss(None),
        rand=lambda: rand,
    )


# -- the rule -----------------------------------------------------------------------------


def test_no_limit_never_recycles() -> None:
    limits = RecycleLimits()
    assert not limits.any
    assert decide(limits, jobs=10**9, age_s=10**9, rss_mb=10**9) is None
    # 0 turns a limit off, like unset.
    zero = RecycleLimits(max_jobs=0, max_rss_mb=0, max_age_s=0)
    assert not zero.any
    assert decide(zero, jobs=10**9, age_s=10**9, rss_mb=10**9) is None


def test_each_limit_is_reached_at_its_value() -> None:
    jobs = RecycleLimits(max_jobs=3)
    assert decide(jobs, jobs=2, age_s=0, rss_mb=None) is None
    assert decide(jobs, jobs=3, age_s=0, rss_mb=None) == Recycle("max_jobs", 3, 3)

    rss = RecycleLimits(max_rss_mb=500)
    assert decide(rss, jobs=1, age_s=0, rss_mb=499.9) is None
    assert decide(rss, jobs=1, age_s=0, rss_mb=512.04) == Recycle("max_rss_mb", 500, 512.0)

    age = RecycleLimits(max_age_s=3600)
    assert decide(age, jobs=0, age_s=3599.5, rss_mb=None) is None
    assert decide(age, jobs=0, age_s=3600.25, rss_mb=None) == Recycle("max_age_s", 3600, 3600.25)


def test_an_rss_limit_is_never_reached_before_the_first_job_or_unmeasured() -> None:
    # A worker whose import alone is above the limit must still run jobs, or it
    # would restart forever doing nothing.
    limits = RecycleLimits(max_rss_mb=10)
    assert decide(limits, jobs=0, age_s=0, rss_mb=900) is None
    assert decide(limits, jobs=1, age_s=0, rss_mb=None) is None
    assert decide(limits, jobs=1, age_s=0, rss_mb=900) is not None


def test_an_idle_worker_recycles_on_age() -> None:
    assert decide(RecycleLimits(max_age_s=60), jobs=0, age_s=61, rss_mb=None) is not None


def test_the_first_limit_in_order_jobs_rss_age_is_named() -> None:
    limits = RecycleLimits(max_jobs=5, max_rss_mb=100, max_age_s=10)
    reached = decide(limits, jobs=5, age_s=20, rss_mb=200)
    assert reached is not None and reached.reason == "max_jobs"
    reached = decide(limits, jobs=4, age_s=20, rss_mb=200)
    assert reached is not None and reached.reason == "max_rss_mb"
    reached = decide(limits, jobs=4, age_s=20, rss_mb=50)
    assert reached is not None and reached.reason == "max_age_s"
    assert reached.describe() == "max_age_s 10 reached (20)"


# -- the spread ---------------------------------------------------------------------------


def test_the_spread_lowers_each_limit_by_at_most_ten_percent() -> None:
    limits = RecycleLimits(max_jobs=1000, max_rss_mb=500, max_age_s=3600)
    assert recycler(limits, rand=0.0).limits == limits  # factor 1
    low = recycler(limits, rand=0.999999).limits
    assert low.max_jobs == 901  # ceil(1000 * 0.9000001)
    assert low.max_rss_mb == pytest.approx(450, abs=0.01)
    assert low.max_age_s == pytest.approx(3240, abs=0.01)
    half = recycler(limits, rand=0.5)
    assert half.factor == pytest.approx(1 - RECYCLE_SPREAD / 2)
    assert half.limits.max_age_s == pytest.approx(3420)
    assert half.configured == limits


def test_a_fleet_gets_different_limits() -> None:
    limits = RecycleLimits(max_age_s=12 * 3600)
    ages = {recycler(limits, rand=r).limits.max_age_s for r in (0.0, 0.25, 0.5, 0.75, 0.99)}
    assert len(ages) == 5
    assert all(0.9 * 12 * 3600 <= a <= 12 * 3600 for a in ages if a is not None)


def test_a_small_job_limit_stays_exact_and_never_drops_to_zero() -> None:
    for n in range(1, 10):
        for r in (0.0, 0.5, 0.999999):
            assert recycler(RecycleLimits(max_jobs=n), rand=r).limits.max_jobs == n
    assert recycler(RecycleLimits(max_jobs=10), rand=0.999999).limits.max_jobs == 10
    assert recycler(RecycleLimits(max_jobs=20), rand=0.999999).limits.max_jobs == 19


def test_unset_limits_stay_unset_after_the_spread() -> None:
    scaled = RecycleLimits(max_jobs=None, max_rss_mb=0, max_age_s=None).scaled(0.9)
    assert scaled == RecycleLimits()


def test_a_spread_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="spread"):
        Recycler(RecycleLimits(), clock=FakeTiming(100.0), spread=1.0)


# -- the recycler ---------------------------------------------------------------------------


def test_age_counts_from_start_not_from_construction() -> None:
    clock = FakeTiming(100.0)
    r = recycler(RecycleLimits(max_age_s=60), clock=clock)
    clock.now = 1000.0  # a long wait for the database or the schema at start
    assert r.age_s() == 0.0 and r.check() is None
    r.start()
    assert r.seconds_left() == 60.0
    clock.now = 1059.0
    assert r.check() is None
    assert r.seconds_left() == pytest.approx(1.0)
    clock.now = 1060.0
    assert r.check() == Recycle("max_age_s", 60, 60)
    assert r.seconds_left() == 0.0


def test_no_age_limit_means_no_idle_deadline() -> None:
    r = recycler(RecycleLimits(max_jobs=3))
    r.start()
    assert r.seconds_left() is None


def test_the_rss_is_read_once_per_job_and_never_while_idle() -> None:
    rss = FakeRss(100.0)
    r = recycler(RecycleLimits(max_rss_mb=200), rss=rss)
    r.start()
    for _ in range(5):  # idle loop iterations: no job ran, no probe
        assert r.check() is None
    assert rss.calls == 0
    r.job_done()
    assert r.check() is None
    assert r.check() is None  # the same job: not read again
    assert rss.calls == 1
    rss.value = 250.0
    r.job_done()
    assert r.check() == Recycle("max_rss_mb", 200, 250)
    assert rss.calls == 2


def test_a_failed_rss_probe_does_not_recycle() -> None:
    r = recycler(RecycleLimits(max_rss_mb=1), rss=FakeRss(None))
    r.start()
    r.job_done()
    assert r.check() is None


def test_without_limits_nothing_is_probed() -> None:
    rss = FakeRss(10**6)
    r = recycler(RecycleLimits(), rss=rss)
    r.start()
    for _ in range(3):
        r.job_done()
        assert r.check() is None
    assert rss.calls == 0
    assert r.claim_room(5, 0) == 5


def test_the_job_limit_counts_jobs_and_the_answer_stays() -> None:
    clock = FakeTiming(100.0)
    r = recycler(RecycleLimits(max_jobs=2), clock=clock)
    r.start()
    r.job_done()
    assert r.check() is None
    r.job_done()
    reached = r.check()
    assert reached == Recycle("max_jobs", 2, 2)
    assert r.check() is reached and r.reached is reached


def test_the_worker_never_claims_a_job_it_would_only_give_back() -> None:
    r = recycler(RecycleLimits(max_jobs=3))
    assert r.claim_room(2, 0) == 2
    r.job_done()
    assert r.claim_room(1, 1) == 1  # one held, one run: room for one more
    r.job_done()
    assert r.claim_room(2, 0) == 1
    assert r.claim_room(1, 1) == 0
    r.job_done()
    assert r.claim_room(2, 0) == 0


def test_the_real_rss_probe_reads_this_process() -> None:
    value = process_rss_mb()
    assert value is not None and 1 < value < 100_000


def test_the_recycle_exit_code_is_its_own() -> None:
    assert ExitCode.RECYCLE == 79
    assert ExitCode.RECYCLE not in (ExitCode.OK, ExitCode.WATCHDOG, ExitCode.STALL)


# -- the settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("1.5m", 90.0),
        ("15m", 900.0),
        ("30m", 1800.0),
        ("12h", 43200.0),
        ("12H", 43200.0),
        (" 2d ", 172800.0),
        ("7d", 604800.0),
        ("2w", 1209600.0),
        ("1.5w", 1.5 * 604800),
        ("0.5", 0.5),
        (".5", 0.5),
        ("0", 0.0),
    ],
)
def test_a_duration_is_seconds_or_a_number_with_a_unit(raw: str, seconds: float) -> None:
    assert table.parse_duration(raw) == seconds


@pytest.mark.parametrize(
    "raw", ["", "h", "12x", "-5", "1e3", "12 hours", "7 days", "1h30m", "inf", "nan"]
)
def test_a_bad_duration_is_one_line_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        table.parse_duration(raw)
    if raw:
        with pytest.raises(ConfigError) as info:
            table.MAX_AGE.read({table.MAX_AGE.env: raw})
        message = str(info.value)
        assert message.startswith(f"QUEUE_ENGINE_MAX_AGE={raw!r} is not a duration")
        assert "\n" not in message


def test_the_limits_are_read_from_the_environment_with_bounds() -> None:
    env = {"QUEUE_ENGINE_MAX_AGE": "12h", "QUEUE_ENGINE_MAX_JOBS": "500"}
    assert table.MAX_AGE.read(env) == 43200.0
    # Before: refused, while `queue-ctl prune --older-than 2w` took weeks.
    assert table.MAX_AGE.read({"QUEUE_ENGINE_MAX_AGE": "2w"}) == 14 * 86400.0
    assert table.MAX_JOBS.read(env) == 500
    assert table.MAX_RSS_MB.read(env) is None
    assert table.MAX_JOBS.read({"QUEUE_ENGINE_MAX_JOBS": "0"}) == 0  # off
    with pytest.raises(ConfigError, match=r"at least 1 \(or 0 to turn it off\)"):
        table.MAX_AGE.read({"QUEUE_ENGINE_MAX_AGE": "0.5s"})
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_MAX_RSS_MB='-1'"):
        table.MAX_RSS_MB.read({"QUEUE_ENGINE_MAX_RSS_MB": "-1"})


def test_the_worker_settings_carry_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from queue_engine.worker.settings import WorkerSettings

    for name in ("QUEUE_ENGINE_MAX_JOBS", "QUEUE_ENGINE_MAX_RSS_MB", "QUEUE_ENGINE_MAX_AGE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QUEUE_ENGINE_MAX_AGE", "30m")
    monkeypatch.setenv("QUEUE_ENGINE_MAX_RSS_MB", "512")
    settings = WorkerSettings.from_env(queue="q", app="a", max_jobs=1000)
    assert (settings.max_jobs, settings.max_rss_mb, settings.max_age_s) == (1000, 512, 1800.0)
    assert WorkerSettings(queue="q", app="a").max_jobs is None
    with pytest.raises(ConfigError, match=r"QUEUE_ENGINE_MAX_JOBS \(--max-jobs\)"):
        WorkerSettings(queue="q", app="a", max_jobs=-1)


def test_an_idle_wait_ends_when_the_age_limit_is_reached() -> None:
    clock = FakeTiming(0.0)
    r = recycler(RecycleLimits(max_age_s=10), clock=clock)
    r.start()
    assert r.cap_wait(1.0) == 1.0
    clock.now = 9.75
    assert r.cap_wait(1.0) == pytest.approx(0.25)
    clock.now = 11.0
    assert r.cap_wait(1.0) == 0.0
    assert recycler(RecycleLimits(max_jobs=1)).cap_wait(1.0) == 1.0
