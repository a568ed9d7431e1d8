#!/usr/bin/env python3
"""Writes tests/vectors/operate_*.json: reset, refund and penalize worked out from the spec alone.

A second implementation of docs/algorithms.md ("Operating a key", and the algorithms it
rests on), written from the page and not from src/core or lua/: each algorithm is a small
class with decide(now, cost) and the three operations, in Python floats (IEEE doubles, as
C++ and Lua) where the page computes in doubles. A case lists its steps; every answer is
the oracle's. Run it after changing a case:
  python3 tests/vectors/operate_oracle.py   (writes the files beside it)
"""
import json
import math
import os

T = 1_700_000_000_000_000  # a whole second, so 1 s windows start on it
S = 1_000_000


def answer(allowed, limit, remaining, retry, reset, blocked=False):
    d = {"allowed": allowed, "limit": limit, "remaining": max(0, remaining),
         "retry_after_us": 0 if allowed else retry, "reset_after_us": reset}
    if blocked:
        d["blocked"] = True
    return d


class Gcra:
    def __init__(self, limit, period, burst=None):
        self.L, self.P = limit, period
        self.B = burst or limit
        self.E = (period + limit - 1) // limit
        self.tau = self.B * self.E
        self.tat = None

    def decide(self, now, c):
        tat = max(self.tat if self.tat is not None else now, now)
        room = max(0, now + self.tau - tat)
        if c == 0:  # a peek: always allowed, even of a key penalized past its limit
            return answer(True, self.L, room // self.E, 0, tat - now)
        if c > self.B:
            return answer(False, self.L, room // self.E, -1, tat - now)
        new = tat + c * self.E
        diff = now + self.tau - new
        if diff >= 0:
            if c > 0:
                self.tat = new
            return answer(True, self.L, diff // self.E, 0, new - now)
        return answer(False, self.L, room // self.E, -diff, tat - now)

    def reset(self, now):
        self.tat = None

    def refund(self, now, u):
        tat = max(self.tat if self.tat is not None else now, now)
        self.tat = max(now, tat - u * self.E)

    def penalize(self, now, u):
        tat = max(self.tat if self.tat is not None else now, now)
        self.tat = tat + u * self.E


class SmoothBucket:
    def __init__(self, limit, period, burst=None):
        self.L, self.P = limit, period
        self.C = burst or limit
        self.state = None  # (t0, last)

    def _state(self, now):
        return self.state if self.state is not None else (float(self.C), now)

    def level(self, st, now, d):
        t0, last = st
        return min(float(self.C), t0 + float(max(0, now + d - last)) * float(self.L) / float(self.P))

    def wait(self, st, now, x):
        t0, last = st
        d = max(0, math.ceil((x - t0) * float(self.P) / float(self.L) - float(now - last)))
        while d > 0 and self.level(st, now, d - 1) >= x:
            d -= 1
        while self.level(st, now, d) < x:
            d += 1
        return d

    def decide(self, now, c):
        st = self._state(now)
        tokens = self.level(st, now, 0)
        if c == 0 or tokens >= c:
            after = st
            if c > 0:
                after = (tokens - c, now)
                self.state = after
            return answer(True, self.L, math.floor(tokens - c), 0,
                          self.wait(after, now, float(self.C)))
        retry = -1 if c > self.C else self.wait(st, now, float(c))
        return answer(False, self.L, math.floor(tokens), retry, self.wait(st, now, float(self.C)))

    def reset(self, now):
        self.state = None

    def refund(self, now, u):
        tokens = self.level(self._state(now), now, 0)
        self.state = (min(float(self.C), tokens + u), now)

    def penalize(self, now, u):
        tokens = self.level(self._state(now), now, 0)
        self.state = (tokens - u, now)


class IntervalBucket:
    def __init__(self, limit, period, burst=None):
        self.L, self.P = limit, period
        self.C = burst or limit
        self.state = None  # (tokens, last)

    def refill(self, now):
        tokens, last = self.state if self.state is not None else (float(self.C), now)
        n = math.floor(float(now - last) / float(self.P))
        if n > 0:
            tokens = min(float(self.C), tokens + n * self.L)
            last = last + n * self.P
        if tokens >= self.C:
            last = now
        return tokens, last

    def _answer(self, now, allowed, c, tokens, last):
        def wait_for(x):
            return last + math.ceil((x - tokens) / self.L) * self.P - now
        retry = 0 if allowed else (-1 if c > self.C else wait_for(c))
        reset = 0 if tokens >= self.C else wait_for(float(self.C))
        return answer(allowed, self.L, math.floor(tokens), retry, reset)

    def decide(self, now, c):
        tokens, last = self.refill(now)
        allowed = c == 0 or tokens >= c
        if allowed:
            tokens -= c
        if c > 0 or self.state is not None:
            self.state = (tokens, last)
        return self._answer(now, allowed, c, tokens, last)

    def reset(self, now):
        self.state = None

    def refund(self, now, u):
        tokens, last = self.refill(now)
        tokens = min(float(self.C), tokens + u)
        if tokens >= self.C:
            last = now
        self.state = (tokens, last)

    def penalize(self, now, u):
        tokens, last = self.refill(now)
        self.state = (tokens - u, last)


class SlidingLog:
    def __init__(self, limit, period):
        self.L, self.P = limit, period
        self.runs = []  # [time, units], oldest first

    def counted(self, now):
        return [r for r in self.runs if r[0] > now - self.P]

    def decide(self, now, c):
        self.runs = self.counted(now)
        count = sum(u for _, u in self.runs)
        allowed = c == 0 or count + c <= self.L
        if allowed and c > 0:
            self.runs.append([now, c])
            count += c
        retry = 0
        if not allowed:
            if c > self.L:
                retry = -1
            else:
                k = count + c - self.L
                for time, units in self.runs:  # the k-th oldest counted unit
                    if k <= units:
                        retry = time + self.P - now
                        break
                    k -= units
        reset = self.runs[-1][0] + self.P - now if self.runs else 0
        return answer(allowed, self.L, self.L - count, retry, reset)

    def reset(self, now):
        self.runs = []

    def refund(self, now, u):
        self.runs = self.counted(now)
        while u > 0 and self.runs:
            back = min(u, self.runs[-1][1])
            self.runs[-1][1] -= back
            u -= back
            if self.runs[-1][1] == 0:
                self.runs.pop()

    def penalize(self, now, u):
        self.runs = self.counted(now)
        self.runs.append([now, u])


class SlidingWindow:
    def __init__(self, limit, period):
        self.L, self.P = limit, period
        self.state = None  # (w, cur, prev)

    def counts(self, w):
        if self.state is None:
            return 0, 0
        sw, cur, prev = self.state
        if sw == w:
            return cur, prev
        if sw == w - 1:
            return 0, cur
        return 0, 0

    def decide(self, now, c):
        L, P = self.L, self.P
        w = now // P
        x = now - w * P
        cur, prev = self.counts(w)
        estimate = float(prev) * float(P - x) / float(P) + float(cur)
        allowed = c == 0 or estimate + c <= L
        retry = 0
        if allowed:
            if c > 0:
                cur += c
                estimate += c
                self.state = (w, cur, prev)
        elif c > L:
            retry = -1
        else:
            if cur <= L - c and prev > 0:
                t = w * P + math.ceil(float(P) - float(L - c - cur) * float(P) / float(prev))
            else:
                t = (w + 1) * P + max(0, math.ceil(float(P) - float(L - c) * float(P) / float(cur)))
            retry = t - now
        reset = (w + 2) * P - now if cur > 0 else ((w + 1) * P - now if prev > 0 else 0)
        return answer(allowed, L, math.floor(L - estimate), retry, reset)

    def _set(self, now, f):
        w = now // self.P
        cur, prev = self.counts(w)
        self.state = (w, f(cur), prev)

    def reset(self, now):
        self.state = None

    def refund(self, now, u):
        self._set(now, lambda cur: max(0, cur - u))

    def penalize(self, now, u):
        self._set(now, lambda cur: cur + u)


class FixedWindow:
    def __init__(self, limit, period):
        self.L, self.P = limit, period
        self.state = None  # (w, count)

    def count(self, w):
        return self.state[1] if self.state is not None and self.state[0] == w else 0

    def decide(self, now, c):
        w = now // self.P
        count = self.count(w)
        allowed = c == 0 or count + c <= self.L
        if allowed and c > 0:
            count += c
            self.state = (w, count)
        end = (w + 1) * self.P - now
        retry = 0 if allowed else (-1 if c > self.L else end)
        return answer(allowed, self.L, self.L - count, retry, end if count > 0 else 0)

    def reset(self, now):
        self.state = None

    def refund(self, now, u):
        w = now // self.P
        self.state = (w, max(0, self.count(w) - u))

    def penalize(self, now, u):
        w = now // self.P
        self.state = (w, self.count(w) + u)


class Blocked:
    """block=D around an algorithm (docs/algorithms.md "Blocks"): blocked_until per key."""

    def __init__(self, algorithm, block):
        self.a, self.D = algorithm, block
        self.until = 0

    def decide(self, now, c):
        if now < self.until:
            left = self.until - now
            own = self.a.decide(now, 0) if c == 0 else None
            if c > 0:
                # Nothing charged: what the algorithm would answer, on a copy.
                import copy
                probe = copy.deepcopy(self.a)
                own = probe.decide(now, c)
                r = 0 if own["allowed"] else own["retry_after_us"]
                if own["allowed"]:
                    own = self.a.decide(now, 0)
                return answer(False, own["limit"], 0, r if r == -1 else max(left, r),
                              max(left, own["reset_after_us"]), True)
            return answer(True, own["limit"], 0, 0, max(left, own["reset_after_us"]), True)
        d = self.a.decide(now, c)
        if c > 0 and not d["allowed"] and d["retry_after_us"] >= 0:
            self.until = now + self.D
            return answer(False, d["limit"], 0, max(self.D, d["retry_after_us"]),
                          max(self.D, d["reset_after_us"]), True)
        return d

    def reset(self, now):
        self.a.reset(now)
        self.until = 0

    def refund(self, now, u):
        self.a.refund(now, u)

    def penalize(self, now, u):
        self.a.penalize(now, u)


def run(make, steps):
    keys = {}
    out = []
    for t, key, op, n in steps:
        k = keys.setdefault(key, make())
        step = {"t": t, "key": key}
        if op == "check":
            step["cost"] = n
            step["expect"] = k.decide(t, n)
        else:
            step["op"] = op
            if op == "reset":
                k.reset(t)
            else:
                step["units"] = n
                getattr(k, op)(t, n)
            step["expect"] = k.decide(t, 0)  # every operation answers the peek after it
        out.append(step)
    return out


def case(name, why, policy, make, steps):
    return {"name": name, "why": why, "policy": policy, "steps": run(make, steps)}


def files():
    ms = 1000
    gcra = [
        case("gcra: a refund moves tat back, to now at most; a penalty past the limit; reset",
             "10/1s (E=100ms, tau=1s): 5 spent, 3 refunded (tat T+200ms: remaining 8), 5 more "
             "refunded than are owed (tat = now: fresh), 25 penalized (tat 2.5s ahead: denied for "
             "1.6s), reset (fresh)",
             "gcra:10/1s", lambda: Gcra(10, S),
             [(T, "a", "check", 5), (T, "a", "refund", 3), (T, "a", "refund", 5),
              (T + ms, "a", "penalize", 25), (T + ms, "a", "check", 1),
              (T + 2 * ms, "a", "reset", 0), (T + 2 * ms, "a", "check", 10),
              (T + 2 * ms, "a", "check", 1)]),
        case("gcra: operations on a key with no state; time passing after a penalty",
             "a refund of a fresh key stays fresh; a penalty of 3 on a fresh key is 3 spent; half "
             "a second later 5 are back",
             "gcra:10/1s,burst=4", lambda: Gcra(10, S, 4),
             [(T, "b", "refund", 2), (T, "b", "penalize", 3), (T + 500 * ms, "b", "check", 0),
              (T + 500 * ms, "b", "check", 4), (T + 500 * ms, "b", "refund", 1)]),
    ]
    buckets = [
        case("token_bucket smooth: refund capped at C, penalty below empty, reset",
             "10/1s, burst 5: 5 spent at T; 2 refunded 50ms later (level 0.5 + 2); 10 refunded "
             "(capped at 5); 12 penalized (level -7: 1.2 s to one token); reset",
             "token_bucket:10/1s,burst=5", lambda: SmoothBucket(10, S, 5),
             [(T, "a", "check", 5), (T + 50 * ms, "a", "refund", 2),
              (T + 60 * ms, "a", "refund", 10), (T + 60 * ms, "a", "penalize", 12),
              (T + 60 * ms, "a", "check", 1), (T + 100 * ms, "a", "reset", 0),
              (T + 100 * ms, "a", "check", 5)]),
        case("token_bucket smooth: a fractional level refunded and penalized",
             "3/1s: levels in thirds, as doubles; the waits are the smallest whole µs",
             "token_bucket:3/1s", lambda: SmoothBucket(3, S),
             [(T, "b", "check", 3), (T + 100 * ms, "b", "refund", 1),
              (T + 200 * ms, "b", "penalize", 2), (T + 300 * ms, "b", "check", 1),
              (T + 2 * S, "b", "penalize", 1)]),
        case("token_bucket interval: refill step first, refund to full resets the phase, penalty",
             "10/1s interval: 8 spent at T; at T+1.5s the refill gave 10 back (full, last = now); "
             "7 spent, 3 refunded (6, last stays T+1.5s), 20 penalized (-14: a cost of 1 waits "
             "two refills, full after three), the refill at T+2.5s then a refund of 30 fills the "
             "bucket (last = now); reset",
             "token_bucket:10/1s,refill=interval", lambda: IntervalBucket(10, S),
             [(T, "a", "check", 8), (T + 1500 * ms, "a", "check", 7),
              (T + 1600 * ms, "a", "refund", 3), (T + 1700 * ms, "a", "penalize", 20),
              (T + 1700 * ms, "a", "check", 1), (T + 2600 * ms, "a", "refund", 30),
              (T + 2600 * ms, "a", "check", 10), (T + 2700 * ms, "a", "reset", 0),
              (T + 2700 * ms, "a", "check", 0)]),
    ]
    logs = [
        case("sliding_log: a refund takes the newest units, whole runs then a split",
             "5/1s: runs of 2 at T, 2 at T+100ms, 1 at T+200ms; refund 2 takes the run of 1 and "
             "one unit of the run at T+100ms (reset from T+100ms); a refund of 9 empties the log",
             "sliding_log:5/1s", lambda: SlidingLog(5, S),
             [(T, "a", "check", 2), (T + 100 * ms, "a", "check", 2),
              (T + 200 * ms, "a", "check", 1), (T + 300 * ms, "a", "refund", 2),
              (T + 300 * ms, "a", "check", 3), (T + 300 * ms, "a", "check", 1),
              (T + 400 * ms, "a", "refund", 9)]),
        case("sliding_log: a penalty is a run at now, past the limit, ageing out after P",
             "3/1s: 1 at T, penalty 4 at T+100ms (5 counted: denied until both runs age out), "
             "an aged run is not refunded, reset",
             "sliding_log:3/1s", lambda: SlidingLog(3, S),
             [(T, "b", "check", 1), (T + 100 * ms, "b", "penalize", 4),
              (T + 200 * ms, "b", "check", 1), (T + S, "b", "check", 0),
              (T + S + 50 * ms, "b", "refund", 1), (T + S + 100 * ms, "b", "check", 3),
              (T + S + 100 * ms, "b", "reset", 0), (T + S + 100 * ms, "b", "check", 3)]),
    ]
    windows = [
        case("sliding_window: refund and penalty on the current window only",
             "10/1m: 6 in window w, 4 in w+1; a refund of 9 in w+1 leaves cur 0 (prev stays 6); a "
             "penalty of 12 takes cur past the limit; reset",
             "sliding_window:10/1m", lambda: SlidingWindow(10, 60 * S),
             [(T, "a", "check", 6), (T + 60 * S, "a", "check", 4),
              (T + 60 * S, "a", "refund", 9), (T + 60 * S, "a", "check", 0),
              (T + 61 * S, "a", "penalize", 12), (T + 61 * S, "a", "check", 1),
              (T + 62 * S, "a", "reset", 0), (T + 62 * S, "a", "check", 10)]),
        case("fixed_window: refund floors at 0, penalty past the limit, a new window forgets",
             "3/1s: 3 spent, 1 refunded, 2 refunded (0), 5 penalized (denied to the window's "
             "end), the next window is fresh, reset on a fresh key",
             "fixed_window:3/1s", lambda: FixedWindow(3, S),
             [(T + 100 * ms, "a", "check", 3), (T + 200 * ms, "a", "refund", 1),
              (T + 200 * ms, "a", "check", 1), (T + 300 * ms, "a", "refund", 5),
              (T + 300 * ms, "a", "penalize", 5), (T + 400 * ms, "a", "check", 1),
              (T + S, "a", "check", 3), (T + S, "b", "reset", 0)]),
    ]
    blocks = [
        case("block: a refund never lifts a block, a penalty keeps it, a reset removes it",
             "gcra:2/1s,block=5s: 2 spent, the 3rd denied starts a 5s block; refund 2 (the key is "
             "fresh, the peek still shows the block); a request is still denied; a penalty of 9 "
             "at T+2s (tat 4.5s ahead, past the block's 3s left); reset at T+3s: fresh and "
             "unblocked",
             "gcra:2/1s,block=5s", lambda: Blocked(Gcra(2, S), 5 * S),
             [(T, "a", "check", 2), (T, "a", "check", 1), (T + S, "a", "refund", 2),
              (T + S, "a", "check", 1), (T + 2 * S, "a", "penalize", 9),
              (T + 3 * S, "a", "reset", 0), (T + 3 * S, "a", "check", 2)]),
        case("block: sliding_log keeps its block through a refund",
             "sliding_log:2/1s,block=2s: 2 spent, the 3rd blocks; refund 2 leaves the block; "
             "after the block the refunded units are free; reset of a blocked key",
             "sliding_log:2/1s,block=2s", lambda: Blocked(SlidingLog(2, S), 2 * S),
             [(T, "a", "check", 2), (T, "a", "check", 1), (T + 100 * ms, "a", "refund", 2),
              (T + 100 * ms, "a", "check", 1), (T + 2 * S, "a", "check", 2),
              (T + 2 * S, "a", "check", 1), (T + 2 * S, "a", "reset", 0)]),
        case("block: fixed_window penalty while blocked",
             "fixed_window:3/1s,block=3s: 3 spent, the 4th blocks for 3s; a penalty of 2 while "
             "blocked; at T+3s the block is over and the window is new",
             "fixed_window:3/1s,block=3s", lambda: Blocked(FixedWindow(3, S), 3 * S),
             [(T, "a", "check", 3), (T, "a", "check", 1), (T + S, "a", "penalize", 2),
              (T + 3 * S, "a", "check", 3)]),
    ]
    return {"operate_gcra.json": ("operate: gcra", gcra),
            "operate_token_bucket.json": ("operate: token_bucket", buckets),
            "operate_sliding_log.json": ("operate: sliding_log", logs),
            "operate_windows.json": ("operate: windows", windows),
            "operate_blocks.json": ("operate: blocks", blocks)}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, (algorithm, cases) in files().items():
        doc = {"algorithm": algorithm,
               "source": "tests/vectors/operate_oracle.py (docs/algorithms.md, Operating a key)",
               "cases": cases}
        with open(os.path.join(here, name), "w") as f:
            f.write("{\n  \"algorithm\": %s,\n  \"source\": %s,\n  \"cases\": [\n"
                    % (json.dumps(doc["algorithm"]), json.dumps(doc["source"])))
            for i, c in enumerate(cases):
                f.write("    {\n      \"name\": %s,\n      \"why\": %s,\n      \"policy\": %s,\n"
                        "      \"steps\": [\n" % (json.dumps(c["name"]), json.dumps(c["why"]),
                                                  json.dumps(c["policy"])))
                f.write(",\n".join("        " + json.dumps(s) for s in c["steps"]))
                f.write("\n      ]\n    }%s\n" % ("," if i + 1 < len(cases) else ""))
            f.write("  ]\n}\n")


if __name__ == "__main__":
    main()
