#!/usr/bin/env python3
"""Writes tests/vectors/delay_{gcra,token_bucket,sliding_log}.json: delay=D worked out alone,
tests/vectors/delay_operate.json: reset, refund and penalize of keys with scheduled charges,
and tests/vectors/multi/delay.json: multi-decisions under delay=.

The expected answers follow docs/algorithms.md, "Waiting (delay=D)" (revision 4), written
afresh from that text rather than from src/core or lua/: the earliest fitting time `s` is
found by search (a binary search over whole µs for the smooth bucket, refill boundaries
one by one for the interval bucket, every time a run stops counting for the sliding log)
where the C++ and Lua use closed forms. A multi-decision follows the spec's rule: every
item's earliest time s_i found by those searches (never from its own answer), s = max s_i,
every item charged as a decision at s when s - now <= min D_i, else nothing charged. Levels are IEEE doubles evaluated in the order the
spec writes them, as C++ and Lua do. Run it after changing a case:
  python3 tests/vectors/delay_oracle.py tests/vectors
"""
import json
import math
import os
import sys

T = 1_700_000_000_000_000
UNITS = {"us": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}


def duration(text):
    digits = len(text) - len(text.lstrip("0123456789"))
    return int(text[:digits] or 1) * UNITS[text[digits:]]


def parse(policy):
    algorithm, rest = policy.split(":", 1)
    parts = rest.split(",")
    limit, period = parts[0].split("/")
    p = {"alg": algorithm, "L": int(limit), "P": duration(period), "B": int(limit),
         "refill": "smooth", "D": 0}
    for option in parts[1:]:
        name, value = option.split("=")
        if name == "burst":
            p["B"] = int(value)
        elif name == "refill":
            p["refill"] = value
        elif name == "delay":
            p["D"] = duration(value)
    return p


def answer(allowed, limit, remaining, retry, reset, delay):
    return {"allowed": allowed, "limit": limit, "remaining": max(0, remaining),
            "retry_after_us": 0 if allowed else retry, "reset_after_us": reset,
            "delay_us": delay}


def admitted_or_denied(p, now, s, admit, denied_reset):
    """The common end of every algorithm: admitted within D, else denied by s - now - D."""
    w = s - now
    if w <= p["D"]:
        return admit(w)
    return answer(False, p["L"], 0, w - p["D"], denied_reset, 0), None


class Gcra:
    def __init__(self, p):
        self.p = p
        self.E = (p["P"] + p["L"] - 1) // p["L"]
        self.tau = p["B"] * self.E

    def decide(self, state, now, c):
        p, E, tau = self.p, self.E, self.tau
        tat = max(state if state is not None else now, now)
        room = max(0, now + tau - tat)
        if c == 0:
            return answer(True, p["L"], room // E, 0, tat - now, 0), state
        if c > p["B"]:
            return answer(False, p["L"], room // E, -1, tat - now, 0), state
        s = self.start(state, now, c)
        out, saved = admitted_or_denied(p, now, s, lambda w: self.charge(state, now, c, s),
                                        tat - now)
        return out, saved if saved is not None else state

    def start(self, state, now, c):
        """The least t >= now at which c conforms: once tat + c*E - tau has passed."""
        tat = max(state if state is not None else now, now)
        return max(now, tat + c * self.E - self.tau)

    def charge(self, state, now, c, s):
        """A decision at s >= earliest: tat moves up to s, then on by c*E."""
        E, tau = self.E, self.tau
        new = max(state if state is not None else now, now, s) + c * E
        remaining = (now + tau - new) // E if s == now else 0
        return answer(True, self.p["L"], remaining, 0, new - now, s - now), new

    def denied_reset(self, state, now):
        return max(state if state is not None else now, now) - now

    def operate(self, state, now, op, u):
        """docs/algorithms.md, "Operating a key": gcra's tat."""
        tat = max(state if state is not None else now, now)
        if op == "reset":
            return None
        if op == "refund":
            new = max(now, tat - u * self.E)
            return None if new == now else new
        return tat + u * self.E


class SmoothBucket:
    def __init__(self, p):
        self.p = p
        self.C = float(p["B"])

    def level(self, t0, last, t):
        """The level at time t >= last: min(C, t0 + (t - last) * L / P), in doubles."""
        return min(self.C, t0 + float(t - last) * float(self.p["L"]) / float(self.p["P"]))

    def earliest(self, t0, last, u, x):
        """The least whole t >= u with level(t) >= x, by binary search (level is monotone)."""
        lo, hi = u, u + 1
        while self.level(t0, last, hi) < x:
            hi = u + 2 * (hi - u)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.level(t0, last, mid) >= x:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def decide(self, state, now, c):
        p, C = self.p, self.C
        t0, last = state if state is not None else (C, now)
        u = max(now, last)
        full = self.earliest(t0, last, u, C) - now
        if c == 0 or c > p["B"]:
            remaining = 0 if last > now else math.floor(self.level(t0, last, u))
            return answer(c == 0, p["L"], remaining, -1, full, 0), state
        s = self.start(state, now, c)
        out, saved = admitted_or_denied(p, now, s, lambda w: self.charge(state, now, c, s), full)
        return out, saved if saved is not None else state

    def start(self, state, now, c):
        t0, last = state if state is not None else (self.C, now)
        return self.earliest(t0, last, max(now, last), float(c))

    def charge(self, state, now, c, s):
        """A decision at s: the level there (it only grows) minus c, last = s."""
        t0, last = state if state is not None else (self.C, now)
        after = (self.level(t0, last, s) - c, s)
        reset = self.earliest(after[0], s, s, self.C) - now
        remaining = math.floor(after[0]) if s == now else 0
        return answer(True, self.p["L"], remaining, 0, reset, s - now), after

    def denied_reset(self, state, now):
        t0, last = state if state is not None else (self.C, now)
        return self.earliest(t0, last, max(now, last), self.C) - now

    def operate(self, state, now, op, u):
        """The level read where tokens exist, u0 = max(now, last) (a last ahead of now is a
        scheduled charge, not time gone backwards), then the operation there."""
        t0, last = state if state is not None else (self.C, now)
        u0 = max(now, last)
        level = self.level(t0, last, u0)
        if op == "reset":
            return None
        if op == "refund":
            return (min(self.C, level + u), u0)
        return (level - u, u0)


class IntervalBucket:
    def __init__(self, p):
        self.p = p
        self.C = float(p["B"])

    def at(self, tokens, last, t):
        """The bucket at time t >= last: whole refills of L at last + n*P, a full one restarts."""
        n = math.floor(float(t - last) / float(self.p["P"]))
        if n > 0:
            tokens = min(self.C, tokens + n * float(self.p["L"]))
            last = last + n * self.p["P"]
        if tokens >= self.C:
            last = t
        return tokens, last

    def until_full(self, tokens, last, now):
        k = 0
        while tokens + k * self.p["L"] < self.C:
            k += 1
        return 0 if k == 0 else last + k * self.p["P"] - now

    def decide(self, state, now, c):
        p = self.p
        tokens, last = state if state is not None else (self.C, now)
        u = max(now, last)
        tokens, last_u = self.at(tokens, last, u)
        full = self.until_full(tokens, last_u, now)
        if c == 0 or c > p["B"]:
            remaining = 0 if last > now else math.floor(tokens)
            return answer(c == 0, p["L"], remaining, -1, full, 0), state
        s = self.start(state, now, c)
        out, saved = admitted_or_denied(p, now, s, lambda w: self.charge(state, now, c, s), full)
        return out, saved if saved is not None else state

    def read(self, state, now):
        tokens, last = state if state is not None else (self.C, now)
        return self.at(tokens, last, max(now, last))

    def start(self, state, now, c):
        tokens, last_u = self.read(state, now)
        s = max(now, state[1] if state is not None else now)
        while self.at(tokens, last_u, s)[0] < c:  # the next refill boundary
            s = last_u + ((s - last_u) // self.p["P"] + 1) * self.p["P"]
        return s

    def charge(self, state, now, c, s):
        """A decision at s: the refills due by s (they only add), then c taken."""
        tokens, last_u = self.read(state, now)
        t, l = self.at(tokens, last_u, s)
        t -= c
        remaining = math.floor(t) if s == now else 0
        return answer(True, self.p["L"], remaining, 0, self.until_full(t, l, now), s - now), (t, l)

    def denied_reset(self, state, now):
        tokens, last_u = self.read(state, now)
        return self.until_full(tokens, last_u, now)

    def operate(self, state, now, op, u):
        """The refill step at max(now, last), then the operation (a full bucket restarts)."""
        tokens, last_u = self.read(state, now)
        if op == "reset":
            return None
        if op == "refund":
            tokens = min(self.C, tokens + u)
            return (tokens, max(now, state[1]) if state is not None and tokens >= self.C
                    else last_u)
        return (tokens - u, last_u)


class SlidingLog:
    def __init__(self, p):
        self.p = p

    def decide(self, state, now, c):
        p, L, P = self.p, self.p["L"], self.p["P"]
        runs = [r for r in (state or []) if r[0] > now - P]
        units = sum(u for _, u in runs)
        held = max(t for t, _ in runs) + P - now if runs else 0
        if c == 0 or c > L:
            return answer(c == 0, L, L - units, -1, held, 0), runs
        s = self.start(state, now, c)
        out, saved = admitted_or_denied(p, now, s, lambda w: self.charge(state, now, c, s), held)
        return out, saved if saved is not None else runs

    def counted(self, state, now):
        return [r for r in (state or []) if r[0] > now - self.p["P"]]

    def start(self, state, now, c):
        L, P = self.p["L"], self.p["P"]
        runs = self.counted(state, now)
        s0 = max([now] + [t for t, _ in runs])

        def fits(t):
            return sum(u for r, u in runs if r > t - P) + c <= L
        return min(t for t in [s0] + [r + P for r, _ in runs if r + P >= s0] if fits(t))

    def charge(self, state, now, c, s):
        """A decision at s: its run stored at s (every run counted at now stays)."""
        L, P = self.p["L"], self.p["P"]
        runs = self.counted(state, now)
        remaining = L - sum(u for _, u in runs) - c if s == now else 0
        return answer(True, L, remaining, 0, s + P - now, s - now), runs + [(s, c)]

    def denied_reset(self, state, now):
        runs = self.counted(state, now)
        return max(t for t, _ in runs) + self.p["P"] - now if runs else 0

    def operate(self, state, now, op, u):
        """Every run counted at now (scheduled ones too); a refund takes the newest units,
        a penalty is a run at now, or at the newest run's time when that is ahead (the log
        stays in time order)."""
        runs = [list(r) for r in self.counted(state, now)]
        if op == "reset":
            return []
        if op == "refund":
            while u > 0 and runs:
                back = min(u, runs[-1][1])
                runs[-1][1] -= back
                u -= back
                if runs[-1][1] == 0:
                    runs.pop()
            return [tuple(r) for r in runs]
        return [tuple(r) for r in runs] + [(max([now] + [t for t, _ in runs]), u)]


class FixedWindow:
    """fixed_window without delay= (docs/algorithms.md, "fixed_window"): a multi-decision's
    item with D = 0."""

    def __init__(self, p):
        self.p = p

    def decide(self, state, now, c):
        L, P = self.p["L"], self.p["P"]
        w = now // P
        count = state[1] if state is not None and state[0] == w else 0
        allowed = count + c <= L
        if allowed:
            count += c
        out = {"allowed": allowed, "limit": L, "remaining": max(0, L - count),
               "retry_after_us": 0 if allowed else (-1 if c > L else (w + 1) * P - now),
               "reset_after_us": (w + 1) * P - now if count > 0 else 0}
        return out, (w, count) if allowed and c > 0 else state

    def start(self, state, now, c):
        out, _ = self.decide(state, now, c)
        if out["allowed"]:
            return now
        return (now // self.p["P"] + 1) * self.p["P"]  # the next window holds none yet


def model(policy):
    p = parse(policy)
    if p["alg"] == "fixed_window":
        return FixedWindow(p)
    if p["alg"] == "gcra":
        return Gcra(p)
    if p["alg"] == "sliding_log":
        return SlidingLog(p)
    return IntervalBucket(p) if p["refill"] == "interval" else SmoothBucket(p)


def case(name, why, policy, steps):
    """steps: (offset from T in µs, key, cost), or (offset, key, operation, units): a reset,
    refund or penalize, answered by the key's peek after it; the expectations are computed
    here."""
    m = model(policy)
    states = {}
    out = []
    for offset, key, *what in steps:
        if len(what) == 1:
            expect, states[key] = m.decide(states.get(key), T + offset, what[0])
            out.append({"t": T + offset, "key": key, "cost": what[0], "expect": expect})
            continue
        op, units = what
        states[key] = m.operate(states.get(key), T + offset, op, units)
        expect, states[key] = m.decide(states[key], T + offset, 0)
        step = {"t": T + offset, "key": key, "op": op}
        if op != "reset":
            step["units"] = units
        out.append({**step, "expect": expect})
    return {"name": name, "why": why, "policy": policy, "steps": out}


MS = 1000
S = 1_000_000


def multi_step(states, now, items):
    """One multi-decision (docs/algorithms.md, "Waiting", multi-decisions; docs/multi.md).

    The items that set the start are the enforced ones with cost > 0 (a shadow or a peek
    never denies, so it never holds the request back either: it is decided as on its own).
    """
    n = len(items)
    models = [model(it["policy"]) for it in items]
    olds = [states.get((it["policy"].split(":")[0], it["key"])) for it in items]
    own = [models[i].decide(olds[i], now, items[i]["cost"]) for i in range(n)]
    schedules = [not it.get("shadow", False) and it["cost"] > 0 for it in items]

    def never(i):
        p = models[i].p
        return items[i]["cost"] > (p["L"] if p["alg"] in ("fixed_window", "sliding_log")
                                   else p["B"])
    starts = [None if never(i) else models[i].start(olds[i], now, items[i]["cost"])
              for i in range(n)]
    ruled = [i for i in range(n) if schedules[i]]
    allowance = min((models[i].p["D"] for i in ruled), default=0)
    wait = 0
    for i in ruled:
        wait = None if wait is None or starts[i] is None else max(wait, starts[i] - now)
    admitted = wait is not None and wait <= allowance

    decisions, news = [], list(olds)
    for i in range(n):
        m, c = models[i], items[i]["cost"]
        if admitted:
            if schedules[i] and m.p["D"] > 0:
                d, news[i] = m.charge(olds[i], now, c, now + wait)
            else:  # decided as on its own (a plain item only ever at once: allowance 0)
                d, news[i] = own[i]
                if not d["allowed"]:
                    news[i] = olds[i]
        else:
            own_answer = own[i][0]
            late = schedules[i] and (starts[i] is None or starts[i] - now > allowance)
            if late and m.p["D"] > 0 and starts[i] is not None:
                d = answer(False, m.p["L"], 0, starts[i] - now - allowance,
                           m.denied_reset(olds[i], now), 0)
            elif late or not own_answer["allowed"] or c == 0:
                d = own_answer  # its own denial (a plain item's is by s_i - now), or a peek
            else:
                d = m.decide(olds[i], now, 0)[0]  # it did not deny: its peek
        decisions.append(d)
    for i, it in enumerate(items):
        states[(it["policy"].split(":")[0], it["key"])] = news[i]

    enforced = [i for i in range(n) if not items[i].get("shadow", False)]
    denied_by = [items[i]["name"] for i in enforced if not decisions[i]["allowed"]]
    would_deny = [it["name"] for i, it in enumerate(items)
                  if it.get("shadow", False) and not decisions[i]["allowed"]]
    if admitted:
        pool = enforced or list(range(n))
        binding = min(pool, key=lambda i: (decisions[i]["remaining"], i))
        retry = 0
    else:
        denying = [i for i in enforced if not decisions[i]["allowed"]]
        longest = lambda i: (float("inf") if decisions[i]["retry_after_us"] < 0
                             else decisions[i]["retry_after_us"])
        binding = max(denying, key=lambda i: (longest(i), -i))
        retry = decisions[binding]["retry_after_us"]
    return {"allowed": admitted, "binding": binding, "retry_after_us": retry,
            "delay_us": wait if admitted else 0, "denied_by": denied_by,
            "would_deny": would_deny, "items": decisions}


def multi_case(name, why, items, steps):
    """items: (name, key, policy[, "shadow"]); steps: (offset from T, costs, one per item)."""
    states, out = {}, []
    for offset, costs in steps:
        request = [{"name": it[0], "key": it[1], "policy": it[2], "cost": cost,
                    **({"shadow": True} if "shadow" in it[3:] else {})}
                   for it, cost in zip(items, costs)]
        out.append({"t": T + offset, "items": request,
                    "expect": multi_step(states, T + offset, request)})
    return {"name": name, "why": why, "steps": out}


MULTI = [
    multi_case(
        "two limits wait for the later start, and each is charged as a decision there",
        "gcra E=100ms and a bucket of one token per 250ms, both burst 1 and delay=1s: after the "
        "first request the gcra item would start at T+100ms and the bucket at T+250ms, so both "
        "are charged at T+250ms (the gcra tat moves up to it: T+350ms); each later request "
        "starts where the slower limit lets it, until the 6th, past the least delay (1s) for "
        "both items; at T+260ms the start is 990ms away",
        [("burst", "u:g", "gcra:10/1s,burst=1,delay=1s"),
         ("steady", "u:t", "token_bucket:4/1s,burst=1,delay=1s")],
        [(0, (1, 1))] * 6 + [(260 * MS, (1, 1)), (260 * MS, (0, 0))]),
    multi_case(
        "the least delay= is the request's allowance",
        "a sliding log of 2/1s with delay=2s beside gcra with delay=300ms: the third request's "
        "log item would start at T+1s, within its own 2s but not within 300ms: denied by the "
        "log with retry 700ms, the gcra item its peek; at T+700ms the same request starts at "
        "T+1s, 300ms away, and the gcra item is charged at T+1s too",
        [("log", "u:s", "sliding_log:2/1s,delay=2s"),
         ("rate", "u:g", "gcra:10/1s,delay=300ms")],
        [(0, (1, 1)), (0, (1, 1)), (0, (1, 1)), (700 * MS, (1, 1)), (700 * MS, (0, 0))]),
    multi_case(
        "an item without delay= allows no wait",
        "gcra with delay=1s beside fixed_window:100/1m (no delay=: D=0): at T+10ms the gcra "
        "item's start is T+100ms, 90ms away, more than the allowance 0: denied with retry "
        "90ms, the window's peek; at T+100ms both fit at once",
        [("rate", "u:g", "gcra:10/1s,burst=1,delay=1s"),
         ("window", "u:w", "fixed_window:100/1m")],
        [(0, (1, 1)), (10 * MS, (1, 1)), (100 * MS, (1, 1))]),
    multi_case(
        "a shadow item and a peek never hold the request back",
        "the enforced gcra item sets the start alone: the shadow bucket (1/1s, delay=500ms) is "
        "decided as on its own (denied on its own at T: would_deny; at T+600ms admitted with "
        "its own delay 400ms while the request proceeds at once); the sliding log item only "
        "peeks",
        [("rate", "u:g", "gcra:10/1s,burst=1,delay=1s"),
         ("rollout", "u:t", "token_bucket:1/1s,burst=1,delay=500ms", "shadow"),
         ("seen", "u:s", "sliding_log:5/1s,delay=1s")],
        [(0, (1, 1, 0)), (0, (1, 1, 0)), (600 * MS, (1, 1, 0))]),
    multi_case(
        "interval refills and a sliding log: the start is the later refill",
        "2 per 1s at whole refills beside a log of 3/1s, both delay=2s: after a cost of 2, a "
        "cost of 1 fits the log at once but the bucket only at its refill at T+1s, where both "
        "are charged (the log's run stored at T+1s); at T+100ms a cost of 2 waits for the "
        "bucket's next refill at T+2s, 1.9s away",
        [("bucket", "u:i", "token_bucket:2/1s,refill=interval,delay=2s"),
         ("log", "u:l", "sliding_log:3/1s,delay=2s")],
        [(0, (2, 2)), (0, (1, 1)), (100 * MS, (2, 2)), (100 * MS, (0, 0))]),
]

GCRA = [
    case("a burst of B at once, then requests delayed E apart up to D, then denied by the excess",
         "E=100ms, tau=200ms: 2 at once (remaining 1, 0); the 3rd fits at s=T+100ms, the 7th at "
         "T+500ms=D (admitted: s-now <= D); the 8th would be T+600ms, denied with retry 100ms",
         "gcra:10/1s,burst=2,delay=500ms",
         [(0, "a", 1)] * 8),
    case("a delayed admission is charged at once: later requests queue behind it (first come first served)",
         "after 2 delayed ones tat=T+400ms; at T+50ms the next fits at T+200ms (delay 150ms); a peek "
         "shows remaining 0 and reset tat-now; a cost the burst never admits stays -1",
         "gcra:10/1s,burst=2,delay=1s",
         [(0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (50 * MS, "a", 1),
          (50 * MS, "a", 0), (50 * MS, "a", 3), (60 * MS, "a", 2)]),
    case("waiting retry_after_us after a denial admits with exactly D of delay",
         "denied with retry r at t; at t + r the same request fits at s - now = D",
         "gcra:4/1s,burst=1,delay=1s",
         [(0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1),
          (250 * MS, "a", 1), (250 * MS + 1, "a", 1), (6 * S, "a", 1), (6 * S, "a", 1)]),
]

TOKEN_BUCKET = [
    case("smooth: the burst, then delays of one token's refill each, then denied",
         "C=3, 10/s: 3 at once; the next wait for 100ms, 200ms, ... of refill; the one past "
         "D=500ms is denied by its excess; remaining 0 while last (a scheduled charge) is ahead",
         "token_bucket:10/1s,burst=3,delay=500ms",
         [(0, "a", 1)] * 9 + [(10 * MS, "a", 0), (700 * MS, "a", 0), (700 * MS, "a", 1)]),
    case("smooth: a rate that is no whole µs per token, the least whole µs found",
         "3/s: a token every 333333.33 µs; each delayed request's s is the least whole µs at "
         "which the level reaches its cost",
         "token_bucket:3/1s,delay=2s",
         [(0, "a", 3), (0, "a", 1), (0, "a", 1), (1, "a", 2), (400 * MS, "a", 1),
          (400 * MS, "a", 4), (5 * S, "a", 2)]),
    case("interval: delayed to the next whole refill, first come first served",
         "5 per 1s at whole refills: 5 at once; the next 5 wait for T+1s; the 11th for T+2s; "
         "with D=1500ms the 11th is denied by 500ms",
         "token_bucket:5/1s,refill=interval,delay=1500ms",
         [(0, "a", 5), (0, "a", 1), (0, "a", 4), (0, "a", 1), (100 * MS, "a", 0),
          (600 * MS, "a", 1), (1 * S, "a", 0), (1 * S, "a", 1), (1200 * MS, "a", 6)]),
    case("interval: a cost above one refill waits for several",
         "C=10, 4 per 500ms: 8 leave 2; a cost of 10 needs 2 refills (T+1s); later ones queue",
         "token_bucket:4/500ms,burst=10,refill=interval,delay=2s",
         [(0, "a", 8), (0, "a", 10), (10 * MS, "a", 3), (10 * MS, "a", 11), (3 * S, "a", 1)]),
]

SLIDING_LOG = [
    case("L at once, then delayed until the oldest units age out, then denied",
         "3/1s: 3 at T; the 4th fits when the first run leaves (T+1s); a cost of 2 more waits "
         "for 2 more units; past D=1500ms denied",
         "sliding_log:3/1s,delay=1500ms",
         [(0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 2), (0, "a", 1),
          (100 * MS, "a", 0), (100 * MS, "a", 4)]),
    case("runs spread in time: s is when enough of them have aged out",
         "units at T, T+200ms, T+400ms; scheduled runs count at their times, so later requests "
         "wait behind them",
         "sliding_log:4/1s,delay=2s",
         [(0, "a", 2), (200 * MS, "a", 1), (400 * MS, "a", 1), (500 * MS, "a", 1),
          (500 * MS, "a", 2), (600 * MS, "a", 1), (1300 * MS, "a", 0), (1300 * MS, "a", 2),
          (6 * S, "a", 1)]),
]


OPERATE = [
    case("gcra: operations on a key with delayed admissions scheduled",
         "E=100ms, burst 2: 2 at once, 3 delayed (tat T+500ms); a refund of 2 moves tat back by "
         "200ms, so the next request waits 100ms less each; a penalty of 3 adds 300ms; a reset "
         "frees the key",
         "gcra:10/1s,burst=2,delay=1s",
         [(0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1),
          (10 * MS, "a", "refund", 2), (10 * MS, "a", 1), (20 * MS, "a", "penalize", 3),
          (20 * MS, "a", 1), (30 * MS, "a", "reset", 0), (30 * MS, "a", 1)]),
    case("smooth bucket: operations while a charge is scheduled ahead of now",
         "C=2, 10/s: 2 at once, 2 delayed (last T+200ms); a refund at T+50ms puts a token back "
         "at last (remaining still 0: it belongs after the scheduled charge), so the next "
         "request fits at last; a penalty charges 2 more there; a reset frees the key",
         "token_bucket:10/1s,burst=2,delay=1s",
         [(0, "a", 1), (0, "a", 1), (0, "a", 1), (0, "a", 1), (50 * MS, "a", "refund", 1),
          (50 * MS, "a", 1), (60 * MS, "a", "penalize", 2), (60 * MS, "a", 1),
          (70 * MS, "a", "reset", 0), (70 * MS, "a", 2)]),
    case("interval bucket: operations while refills are promised to delayed requests",
         "4 per 1s at whole refills: 4 at once, 4 delayed to T+1s; a refund of 3 at T+100ms "
         "comes back at the refill already charged; a penalty of 2 takes from it",
         "token_bucket:4/1s,refill=interval,delay=2s",
         [(0, "a", 4), (0, "a", 4), (100 * MS, "a", "refund", 3), (100 * MS, "a", 2),
          (200 * MS, "a", "penalize", 2), (200 * MS, "a", 1), (300 * MS, "a", "reset", 0),
          (300 * MS, "a", 4)]),
    case("sliding log: operations on a log with scheduled runs",
         "3/1s: 3 at T, 2 delayed to T+1s; at T+500ms the runs at T still count: a refund of 1 "
         "takes a scheduled unit (the newest), the next request takes its place at T+1s; a "
         "penalty of 2 is a run at T+1s (the newest time); a reset empties the log, scheduled "
         "runs too",
         "sliding_log:3/1s,delay=2s",
         [(0, "a", 3), (0, "a", 1), (0, "a", 1), (500 * MS, "a", "refund", 1),
          (500 * MS, "a", 0), (500 * MS, "a", 1), (600 * MS, "a", "penalize", 2),
          (600 * MS, "a", 1), (700 * MS, "a", "reset", 0), (700 * MS, "a", 3)]),
]


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, cases in (("gcra", GCRA), ("token_bucket", TOKEN_BUCKET),
                        ("sliding_log", SLIDING_LOG), ("operate", OPERATE)):
        with open(os.path.join(out_dir, f"delay_{name}.json"), "w") as f:
            f.write('{\n  "algorithm": "delay",\n  "generator": "tests/vectors/delay_oracle.py",\n'
                    '  "cases": [\n')
            for i, c in enumerate(cases):
                steps = ",\n".join("        " + json.dumps(s, ensure_ascii=False)
                                   for s in c["steps"])
                f.write('    {\n      "name": %s,\n      "why": %s,\n      "policy": %s,\n'
                        '      "steps": [\n%s\n      ]\n    }%s\n'
                        % (json.dumps(c["name"]), json.dumps(c["why"], ensure_ascii=False),
                           json.dumps(c["policy"]), steps, "," if i + 1 < len(cases) else ""))
            f.write("  ]\n}\n")
    with open(os.path.join(out_dir, "multi", "delay.json"), "w") as f:
        f.write('{\n  "generator": "tests/vectors/delay_oracle.py",\n  "cases": [\n')
        for i, c in enumerate(MULTI):
            steps = ",\n".join("        " + json.dumps(s, ensure_ascii=False) for s in c["steps"])
            f.write('    {\n      "name": %s,\n      "why": %s,\n      "steps": [\n%s\n      ]\n    }%s\n'
                    % (json.dumps(c["name"]), json.dumps(c["why"], ensure_ascii=False), steps,
                       "," if i + 1 < len(MULTI) else ""))
        f.write("  ]\n}\n")


if __name__ == "__main__":
    main()
