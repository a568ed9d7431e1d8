#!/usr/bin/env python3
"""Regenerates sample.jsonl, the sample replay trace. Deterministic (seeded).

Two minutes of traffic from 40 ordinary users, 3 steady scrapers and 2 bursty bulk clients (some
requests cost 5).
"""
import json
import random

random.seed(7)
T0 = 1_700_000_000_000_000
events = []
for u in range(40):
    t = T0 + random.randint(0, 3_000_000)
    rate = random.uniform(0.2, 1.5)  # requests/s
    while t < T0 + 120_000_000:
        events.append((t, f"user:{u}", 1))
        t += int(random.expovariate(rate) * 1e6) + 1
for s in range(3):
    t = T0 + random.randint(0, 1_000_000)
    rate = random.uniform(8, 15)
    while t < T0 + 120_000_000:
        events.append((t, f"scraper:{s}", 1))
        t += int(random.expovariate(rate) * 1e6) + 1
for b in range(2):
    start = T0 + 5_000_000 + b * 7_000_000
    while start < T0 + 120_000_000:
        t = start
        for i in range(50):
            events.append((t, f"bulk:{b}", 5 if i % 10 == 0 else 1))
            t += random.randint(1_000, 20_000)
        start += 20_000_000
events.sort()
with open("sample.jsonl", "w") as f:
    for t, k, c in events:
        f.write(json.dumps({"t": t, "key": k, "cost": c}, separators=(",", ":")) + "\n")
