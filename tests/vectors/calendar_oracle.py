#!/usr/bin/env python3
"""Writes tests/vectors/calendar.json: calendar windows (tz=ZONE) worked out independently.

The expected answers come from Python's zoneinfo (the same tzdata files, read by other
code than abseil's) and the formulas of docs/algorithms.md ("Calendar windows"), evaluated
in Python floats (IEEE doubles, as C++ and Lua), so the vectors check floodgate's abseil
bounds and its scripts against a second implementation. Run it after changing a case:
  python3 tests/vectors/calendar_oracle.py > tests/vectors/calendar.json
"""
import datetime as dt
import json
import math
from zoneinfo import ZoneInfo

UTC = dt.timezone.utc
EPOCH_DAY = dt.date(1970, 1, 1)
EPOCH_MONDAY = dt.date(1970, 1, 5)


def us(t):
    """µs since the epoch of an aware datetime (exact: no float)."""
    d = t - dt.datetime(1970, 1, 1, tzinfo=UTC)
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def local_naive(t_us, zone):
    return (dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=t_us)) \
        .astimezone(zone).replace(tzinfo=None)


def ordinal(unit, t_us, zone):
    day = local_naive(t_us, zone).date()
    if unit == "d":
        return (day - EPOCH_DAY).days
    if unit == "w":
        return (day - EPOCH_MONDAY).days // 7
    if unit == "mo":
        return (day.year - 1970) * 12 + day.month - 1
    return day.year - 1970


def first_day(unit, n):
    if unit == "d":
        return EPOCH_DAY + dt.timedelta(days=n)
    if unit == "w":
        return EPOCH_MONDAY + dt.timedelta(days=7 * n)
    if unit == "mo":
        return dt.date(1970 + n // 12, n % 12 + 1, 1)
    return dt.date(1970 + n, 1, 1)


def start(unit, n, zone):
    """The first instant whose civil time in zone is at or after the window's first
    midnight: that midnight, its first occurrence, or the end of a gap that skips it.
    Bisection on whole seconds (transitions are whole seconds)."""
    midnight = dt.datetime.combine(first_day(unit, n), dt.time())
    guess = us(midnight.replace(tzinfo=UTC)) // 1_000_000
    lo, hi = guess - 2 * 86400, guess + 2 * 86400  # every UTC offset is within a day
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if local_naive(mid * 1_000_000, zone) >= midnight:
            hi = mid
        else:
            lo = mid
    return hi * 1_000_000


class Key:
    """One key's state under the spec's rules (times only go forward in these cases)."""

    def __init__(self, algorithm, limit, unit, zone):
        self.algorithm, self.limit, self.unit, self.zone = algorithm, limit, unit, zone
        self.w, self.cur, self.prev = None, 0, 0

    def decide(self, now, c):
        L, u, z = self.limit, self.unit, self.zone
        w = ordinal(u, now, z)
        s, e, e2 = start(u, w, z), start(u, w + 1, z), start(u, w + 2, z)
        assert s <= now < e, (s, now, e)
        cur = self.cur if self.w == w else 0
        prev = self.prev if self.w == w else (self.cur if self.w == w - 1 else 0)
        if self.algorithm == "fixed_window":
            allowed = c == 0 or cur + c <= L
            if allowed and c > 0:
                cur += c
                self.w, self.cur = w, cur
            retry = 0 if allowed else (-1 if c > L else e - now)
            return allowed, L - cur, retry, (e - now if cur > 0 else 0)
        P, Pn, x = s and e - s, e2 - e, now - s
        estimate = float(prev) * float(P - x) / float(P) + float(cur)
        allowed = c == 0 or estimate + float(c) <= float(L)
        retry = 0
        if allowed:
            if c > 0:
                cur += c
                estimate += float(c)
                self.w, self.cur, self.prev = w, cur, prev
        elif c > L:
            retry = -1
        else:
            if cur <= L - c and prev > 0:
                t = s + math.ceil(float(P) - float(L - c - cur) * float(P) / float(prev))
            else:
                t = e + max(0, math.ceil(float(Pn) - float(L - c) * float(Pn) / float(cur)))
            retry = t - now
        reset = e2 - now if cur > 0 else (e - now if prev > 0 else 0)
        return allowed, max(0, math.floor(float(L) - estimate)), retry, reset


def case(name, why, policy, steps):
    algorithm, rest = policy.split(":", 1)
    rate, tz = rest.split(",tz=")
    limit, period = rate.split("/")
    zone = ZoneInfo(tz)
    unit = period[1:]
    keys = {}
    out = []
    for t, key, cost in steps:
        now = us(dt.datetime.fromisoformat(t))
        k = keys.setdefault(key, Key(algorithm, int(limit), unit, zone))
        allowed, remaining, retry, reset = k.decide(now, cost)
        out.append({"t": t, "key": key, "cost": cost,
                    "expect": {"allowed": allowed, "limit": int(limit), "remaining": remaining,
                               "retry_after_us": retry, "reset_after_us": reset}})
    return {"name": name, "why": why, "policy": policy, "steps": out}


CASES = [
    case("month end in New York (west of UTC): February starts at 05:00 UTC",
         "1mo in America/New_York: at 2028-02-01T02:00Z it is still January 31 21:00 local, so the "
         "January count holds and the wait runs to 2028-02-01T05:00Z; at 04:59:59.999999Z still "
         "denied with retry 1; at 05:00Z February's window is fresh",
         "fixed_window:3/1mo,tz=America/New_York",
         [("2028-01-31T20:00:00-05:00", "a", 3),
          ("2028-02-01T02:00:00+00:00", "a", 1),
          ("2028-02-01T02:00:00+00:00", "a", 0),
          ("2028-02-01T04:59:59.999999+00:00", "a", 1),
          ("2028-02-01T05:00:00+00:00", "a", 1),
          ("2028-02-01T05:00:00+00:00", "a", 4)]),
    case("leap day: February 2028 has 29 days, and Feb 29 is a day of its own",
         "1d in America/New_York on 2028-02-29: the window runs from 05:00Z on the 29th to "
         "05:00Z on March 1 (24 h), so a denial late on the 29th waits to local midnight",
         "fixed_window:2/1d,tz=America/New_York",
         [("2028-02-28T23:59:59-05:00", "a", 2),
          ("2028-02-29T00:00:00-05:00", "a", 2),
          ("2028-02-29T23:00:00-05:00", "a", 1),
          ("2028-03-01T00:00:00-05:00", "a", 1)]),
    case("sliding month over the leap day: P_w = 29 days, P_n = 31 days",
         "sliding 1mo in America/New_York: 10 units in January weigh (P_w - x)/P_w in "
         "February, with P_w = 29 d; a denial on Feb 29 waits within February while prev "
         "decays, and a large cost waits into March, sized by P_n = 31 d",
         "sliding_window:10/1mo,tz=America/New_York",
         [("2028-01-15T12:00:00-05:00", "a", 10),
          ("2028-02-01T00:00:00-05:00", "a", 1),
          ("2028-02-15T12:00:00-05:00", "a", 4),
          ("2028-02-15T12:00:00-05:00", "a", 2),
          ("2028-02-29T18:00:00-05:00", "a", 0),
          ("2028-02-29T18:00:00-05:00", "a", 8),
          ("2028-03-01T00:00:00-05:00", "a", 0)]),
    case("the 23-hour day: DST starts in New York on 2028-03-12",
         "1d sliding in America/New_York: March 12 runs from 05:00Z to 04:00Z next day, "
         "23 h; prev from March 11 weighs (23h - x)/23h, the waits and resets end at the "
         "local midnights",
         "sliding_window:6/1d,tz=America/New_York",
         [("2028-03-11T22:00:00-05:00", "a", 6),
          ("2028-03-12T00:00:00-05:00", "a", 1),
          ("2028-03-12T03:00:00-04:00", "a", 1),
          ("2028-03-12T12:00:00-04:00", "a", 2),
          ("2028-03-12T12:00:00-04:00", "a", 5),
          ("2028-03-12T23:59:59.999999-04:00", "a", 0),
          ("2028-03-13T00:00:00-04:00", "a", 6)]),
    case("the 25-hour day: DST ends in New York on 2028-11-05",
         "1d in America/New_York: November 5 runs from 04:00Z to 05:00Z next day, 25 h; "
         "the repeated 01:00-02:00 hour stays in the same window",
         "fixed_window:2/1d,tz=America/New_York",
         [("2028-11-05T00:30:00-04:00", "a", 1),
          ("2028-11-05T01:30:00-04:00", "a", 1),
          ("2028-11-05T01:30:00-05:00", "a", 1),
          ("2028-11-05T23:59:59-05:00", "a", 1),
          ("2028-11-06T00:00:00-05:00", "a", 1)]),
    case("the 25-hour day, sliding: P_w = 25 h",
         "1d sliding in America/New_York: 4 units on November 4 weigh (25h - x)/25h on "
         "November 5; the else branch sizes the wait by P_n = 24 h",
         "sliding_window:4/1d,tz=America/New_York",
         [("2028-11-04T23:00:00-04:00", "a", 4),
          ("2028-11-05T01:30:00-05:00", "a", 1),
          ("2028-11-05T12:30:00-05:00", "a", 2),
          ("2028-11-05T12:30:00-05:00", "a", 1),
          ("2028-11-05T12:30:00-05:00", "a", 4)]),
    case("ISO week across a year boundary",
         "1w in Europe/Berlin: Monday 2027-12-27 to Sunday 2028-01-02 is one window (ISO week "
         "52 of 2027), the next starts Monday 2028-01-03 at local midnight (23:00Z)",
         "fixed_window:3/1w,tz=Europe/Berlin",
         [("2027-12-27T00:00:00+01:00", "a", 1),
          ("2027-12-31T23:59:59+01:00", "a", 1),
          ("2028-01-02T23:00:00+01:00", "a", 1),
          ("2028-01-02T23:30:00+01:00", "a", 1),
          ("2028-01-03T00:00:00+01:00", "a", 1)]),
    case("a day whose midnight does not exist starts after the gap",
         "1d in America/Sao_Paulo on 2018-11-04: clocks went from 00:00 to 01:00, so the day "
         "starts at 01:00 local (03:00Z) and lasts 23 h; November 3 lasted 24 h",
         "fixed_window:1/1d,tz=America/Sao_Paulo",
         [("2018-11-03T23:59:59-03:00", "a", 1),
          ("2018-11-03T23:59:59-03:00", "a", 1),
          ("2018-11-04T01:00:00-02:00", "a", 1),
          ("2018-11-04T01:00:00-02:00", "a", 1)]),
    case("a leap year in UTC: 366 days",
         "1y in UTC: 2028 runs from 2028-01-01T00:00Z to 2029-01-01T00:00Z",
         "fixed_window:1/1y,tz=UTC",
         [("2028-12-31T23:59:59+00:00", "a", 1),
          ("2028-12-31T23:59:59+00:00", "a", 1),
          ("2029-01-01T00:00:00+00:00", "a", 1)]),
]

print(json.dumps({"algorithm": "calendar windows (tz=ZONE), from calendar_oracle.py",
                  "cases": CASES}, indent=2, ensure_ascii=False))
