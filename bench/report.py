#!/usr/bin/env python3
"""`make bench`: runs every benchmark part and keeps the answer in the repository.

Parts (each its own script or program, each writing a Markdown table and a CSV):
  1. in-process: bench/memory_matrix.py (every algorithm on memory://) and
     bench/memory_bench (against a bare baseline loop; memory per key);
  2. Redis: bench/redis_bench.py (every algorithm next to redis-benchmark at its best
     pipelining depth, running the better of our single script and, for gcra, a bare
     one, with Redis CPU per decision for both single scripts, the batch script and a
     bare batched gcra script; memory per key in Redis; about 13 minutes)
     and bench/cluster_bench.py (3 primaries next to one server);
  3. HTTP: bench/http_bench.py (floodgate serve, nginx limit_req answering with
     empty_gif, Express with rate-limiter-flexible, under the same wrk settings; each
     proven to deny over the limit first);
  4. accuracy: bench/accuracy_bench (approximate algorithms against the exact log on a
     bursty trace; a non-atomic limiter against the scripts on a real Redis);
  5. JSON parsing cost (bench/json_bench); loading configs of 10,000 to 60,000 rules
     beside yaml-cpp's parse of the same text, and matching a request against the rules
     (bench/config_bench);
  6. several limits in one decision (docs/multi.md): a two-limit decision against a
     one-limit one, in process (bench/memory_bench --multi) and on Redis and Redis
     Cluster with batching on (bench/multi_bench.py); over HTTP, floodgate with a rule of
     two limits against nginx with two limit_req zones, each limit on each side proven
     to deny first, runs within part 3 (bench/http_bench.py, http_multi.md);
  7. failover (bench/failover_bench.py, about 4 minutes): Sentinel and Redis Cluster
     under load through each fault (a planned failover, kill -9, SIGSTOP), with and
     without wait_replicas: acknowledged decisions lost, degraded answers, time to the
     first answer on the new primary;
  8. waiting (delay=, issue 38): a throttled fleet (bench/fleet_bench.py, about 2 minutes:
     4 processes on one Redis key at 3x the rate through Limiter::WaitAsync, against npm
     bottleneck clustered on the same Redis: the rate at proceed times, the fullest 1 s
     window, Redis CPU per request) and /v1/authz answers held for their delay
     (bench/authz_hold_bench.py: RSS per held answer, 10,000 held);
  9. soak (bench/soak_bench, 10 minutes, after the comparisons so that it cannot disturb
     them): memory:// over 10 million distinct keys under its max_keys bound.
Parts 1-8 take about 27 minutes on 2 cores; the soak adds its 10 (--no-soak skips it).
Then writes bench/results/latest.md (every table, with the machine, versions and date),
bench/results/headline.md (the headline ratios, computed from the parts' CSVs) and PNG
charts drawn by gnuplot, and fills the tables of docs/benchmarks.md (the full report)
and the headline block of README.md from them. Every figure is a median of several
runs; ratios are taken pair by pair within a run.
--only PART[,PART] runs those parts alone (names: see PARTS) and writes their files to
--out, without latest.md, the charts, docs/benchmarks.md or the README (which show every
part of one run):
  python3 bench/report.py --only multi-memory,multi-redis --out /tmp/fg-bench
"""
import argparse
import csv
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from redis_bench import Redis  # noqa: E402  (a redis-server on a free port, for part 4)


def version(command, pattern=r"[\d]+\.[\d.]+"):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10)
        found = re.search(pattern, out.stdout + out.stderr)
        return found.group(0) if found else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), platform.processor())
    mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    return f"{model}, {os.cpu_count()} cores, {mem_kb / 2**20:.0f} GiB, Linux {platform.release()}"


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def charts(out, tmp):
    """throughput by algorithm and store, latency percentiles, accuracy, HTTP."""
    os.makedirs(tmp, exist_ok=True)
    matrix = read_csv(os.path.join(out, "memory_matrix.csv"))
    redis = read_csv(os.path.join(out, "redis.csv"))
    memory = {r["algorithm"]: r for r in matrix
              if r["traffic"] == "100k uniform" and r["threads"] == "2"}
    latency = {r["algorithm"]: r for r in matrix
               if r["traffic"] == "100k uniform" and r["threads"] == "1"}
    with open(os.path.join(tmp, "throughput.dat"), "w") as f:
        for r in redis:
            if r["keys"] != "100000":
                continue
            name = r["algorithm"]
            f.write(f'"{name}" {memory[name]["decisions_per_sec"]} {r["batch_off_per_sec"]} '
                    f'{r["batch_on_per_sec"]} {r["ceiling_per_sec"]}\n')
    common = ('set terminal pngcairo size 1000,520 font "sans,10" noenhanced\n'
              'set style data histograms\nset style histogram clustered gap 1\n'
              'set style fill solid 0.85 border -1\nset boxwidth 0.9\nset grid ytics\n'
              'set key outside bottom center horizontal\nset xtics rotate by -20\n')
    gnuplot(common + f'''
set output "{out}/throughput.png"
set title "Decisions per second by algorithm and store (100,000 keys, log scale)"
set logscale y
set format y "%.0s%c"
plot "{tmp}/throughput.dat" using 2:xtic(1) title "memory:// (2 threads)", \
     "" using 3 title "redis:// batching off", "" using 4 title "redis:// batching on", \
     "" using 5 title "redis-benchmark EVALSHA, best single script at its best depth (ceiling)"
''')
    with open(os.path.join(tmp, "latency.dat"), "w") as f:
        for name, r in latency.items():
            f.write(f'"{name}" {r["p50_us"]} {r["p99_us"]} {r["p999_us"]}\n')
    gnuplot(common + f'''
set output "{out}/latency.png"
set title "memory:// latency per decision, 100,000 keys, 1 thread (µs)"
set ylabel "µs"
plot "{tmp}/latency.dat" using 2:xtic(1) title "p50", "" using 3 title "p99", \
     "" using 4 title "p999"
''')
    accuracy = [r for r in read_csv(os.path.join(out, "accuracy.csv")) if r["part"] == "trace"]
    with open(os.path.join(tmp, "accuracy.dat"), "w") as f:
        for r in accuracy:
            f.write(f'"{r["algorithm"]}" {r["over_pct"]} {r["under_pct"]} '
                    f'{float(r["worst_window_x_limit"]) * 100 - 100:.2f}\n')
    gnuplot(common + f'''
set output "{out}/accuracy.png"
set title "Against the exact sliding log on a bursty trace (% of the log's admissions)"
set ylabel "%"
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
plot "{tmp}/accuracy.dat" using 2:xtic(1) title "over-admission", \
     "" using 3 title "under-admission", "" using 4 title "worst 10 s window above the limit"
''')
    http = read_csv(os.path.join(out, "http.csv"))
    with open(os.path.join(tmp, "http.dat"), "w") as f:
        nginx = sorted(float(r["nginx_rps"]) for r in http)[len(http) // 2]
        n = http[0].get("server_threads", "?")  # a CSV from before the column: unknown
        f.write(f'"nginx limit_req + empty_gif" {nginx}\n')
        for r in http:
            f.write(f'"{r["server"]} {r["endpoint"]}" {r["rps"]}\n')
    gnuplot(common + f'''
set output "{out}/http.png"
set title "HTTP requests/s, same wrk load ({n} nginx worker(s), {n} floodgate thread(s), {n} Node process(es))"
set format y "%.0s%c"
set key off
plot "{tmp}/http.dat" using 2:xtic(1)
''')


def soak_chart(out):
    if not os.path.exists(os.path.join(out, "soak.csv")):
        return
    gnuplot(f'''
set terminal pngcairo size 1000,420 font "sans,10" noenhanced
set output "{out}/soak.png"
set title "Soak: memory:// over 10 million keys, max_keys 1,000,000"
set datafile separator ","
set key bottom right
set autoscale xfix
set grid
set xlabel "seconds"
set ylabel "RSS (MiB)"
set y2label "million decisions/s"
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
plot "{out}/soak.csv" every ::1 using 1:($3/1024) with lines lw 2 title "RSS", \\
     "" every ::1 using 1:($2/1e6) axes x1y2 with lines lw 2 title "decisions/s"
''')


def accuracy_part(args, out):
    def run():
        redis = Redis()
        try:
            subprocess.run([f"{args.build}/bench/accuracy_bench", "--redis-port", str(redis.port),
                            "--csv", f"{out}/accuracy.csv", "--markdown", f"{out}/accuracy.md"],
                           check=True)
        finally:
            redis.stop()
    return run


def json_part(args, out):
    def run():
        json_out = subprocess.run([f"{args.build}/bench/json_bench", "--benchmark_repetitions=5",
                                   "--benchmark_report_aggregates_only=true"],
                                  capture_output=True, text=True, check=True).stdout
        with open(f"{out}/json.txt", "w") as f:
            f.write(json_out)
    return run


def config_part(args, out):
    def run():
        config_out = subprocess.run([f"{args.build}/bench/config_bench", "--benchmark_repetitions=3",
                                     "--benchmark_report_aggregates_only=true"],
                                    capture_output=True, text=True, check=True).stdout
        with open(f"{out}/config.txt", "w") as f:
            f.write(config_out)
    return run


# The parts in the order `make bench` runs them: name -> (title, function of (args,
# floodgate binary, results dir) giving a command line or a function to call). The soak
# goes last, after everything else, so that it cannot disturb the comparisons.
PARTS = {
    "memory-matrix": ("memory:// by algorithm", lambda args, binary, out: [
        sys.executable, f"{HERE}/memory_matrix.py", "--floodgate", binary, "--out", out]),
    "memory": ("memory:// against a baseline; memory per key", lambda args, binary, out: [
        f"{args.build}/bench/memory_bench", "--rounds", "6", "--seconds", "0.5",
        "--markdown", f"{out}/memory.md", "--csv", f"{out}/memory.csv"]),
    "multi-memory": ("several limits in one decision: memory://", lambda args, binary, out: [
        f"{args.build}/bench/memory_bench", "--multi", "--rounds", "5", "--seconds", "0.5",
        "--markdown", f"{out}/multi_memory.md", "--csv", f"{out}/multi_memory.csv"]),
    "redis": ("redis://", lambda args, binary, out: [
        sys.executable, f"{HERE}/redis_bench.py", "--floodgate", binary, "--lua",
        os.path.join(HERE, "..", "lua"), "--out", out]),
    "cluster": ("redis-cluster://", lambda args, binary, out: [
        sys.executable, f"{HERE}/cluster_bench.py", "--floodgate", binary, "--out", out]),
    # Sentinel and Cluster through their faults, with and without wait_replicas: failover.md.
    "failover": ("failover: redis-sentinel:// and redis-cluster://", lambda args, binary, out: [
        sys.executable, f"{HERE}/failover_bench.py", "--floodgate", binary, "--out", out]),
    "multi-redis": ("several limits in one decision: redis:// and redis-cluster://",
                    lambda args, binary, out: [sys.executable, f"{HERE}/multi_bench.py",
                                               "--floodgate", binary, "--out", out]),
    # Writes http.md and, for several limits in one decision, http_multi.md.
    "http": ("HTTP", lambda args, binary, out: [
        sys.executable, f"{HERE}/http_bench.py", "--floodgate", binary, "--out", out]),
    # The two-limit HTTP comparison alone (`make bench` runs it within "http").
    "http-multi": ("several limits in one decision: HTTP", lambda args, binary, out: [
        sys.executable, f"{HERE}/http_bench.py", "--floodgate", binary, "--out", out,
        "--only-multi"]),
    # Leased budgets (prefetch=auto) against per-request decisions: prefetch.md.
    "prefetch": ("prefetch: leased budgets on Redis", lambda args, binary, out: [
        sys.executable, f"{HERE}/prefetch_bench.py", "--floodgate", binary, "--out", out]),
    # Envoy's rate limit service (gRPC) against /v1/check, memory://: rls.md.
    "rls": ("Envoy RLS v3 against HTTP", lambda args, binary, out: [
        sys.executable, f"{HERE}/rls_bench.py", "--floodgate", binary, "--rls-load",
        f"{args.build}/bench/rls_load", "--out", out]),
    # Upstream's counters (lua/upstream.lua) against floodgate's own RLS path, on Redis:
    # rls_counters.md.
    "rls-counters": ("Envoy RLS: upstream's counters against floodgate's path", lambda args, binary, out: [
        sys.executable, f"{HERE}/rls_counters_bench.py", "--floodgate", binary, "--rls-load",
        f"{args.build}/bench/rls_load", "--out", out]),
    # Reserve + settle and acquire + release against one Check: reservations.md.
    "reservations": ("reservations and leases", lambda args, binary, out: [
        sys.executable, f"{HERE}/reserve_bench.py", "--floodgate", binary, "--out", out]),
    # A throttled worker fleet (delay=) against bottleneck: fleet.md.
    "fleet": ("throttled fleet: delay= on one Redis key", lambda args, binary, out: [
        sys.executable, f"{HERE}/fleet_bench.py", "--worker", f"{args.build}/bench/fleet_worker",
        "--out", out]),
    # /v1/authz answers held for their delay, RSS per held answer: authz_hold.md.
    "authz-hold": ("/v1/authz answers held for their delay", lambda args, binary, out: [
        sys.executable, f"{HERE}/authz_hold_bench.py", "--floodgate", binary, "--out", out]),
    "accuracy": ("accuracy", lambda args, binary, out: accuracy_part(args, out)),
    "json": ("JSON parsing", lambda args, binary, out: json_part(args, out)),
    "config": ("config loading", lambda args, binary, out: config_part(args, out)),
    "soak": ("soak", lambda args, binary, out: [
        f"{args.build}/bench/soak_bench", "--csv", f"{out}/soak.csv",
        "--markdown", f"{out}/soak.md"]),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--no-soak", action="store_true")
    parser.add_argument("--charts-only", action="store_true",
                        help="redraw latest.md, headline.md, the charts, docs/benchmarks.md "
                             "and the README's headline from the files already there")
    parser.add_argument("--only", default="",
                        help="comma-separated parts to run alone, files to --out only: "
                             + ", ".join(PARTS))
    args = parser.parse_args()
    binary = os.path.join(args.build, "floodgate")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    took = {}

    def part(name, command):
        """`command`: a command line, or a function doing the part."""
        print(f"== {name}", file=sys.stderr, flush=True)
        begin = time.time()
        if callable(command):
            command()
        else:
            subprocess.run(command, check=True)
        took[name] = time.time() - begin

    if args.only:
        wanted = [p.strip() for p in args.only.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in PARTS]
        if unknown:
            raise SystemExit(f"report: --only {', '.join(unknown)}: no such part "
                             f"(parts: {', '.join(PARTS)})")
        for key in wanted:
            part(PARTS[key][0], PARTS[key][1](args, binary, out))
        print(f"wrote the files of {', '.join(wanted)} to {out} (not latest.md, the charts, "
              "docs/benchmarks.md or the README: they show every part of one run)",
              file=sys.stderr)
        return

    if not args.charts_only:
        started = time.time()
        for key, (name, run) in PARTS.items():
            if key in ("http-multi", "soak"):  # http runs the first; the soak goes last
                continue
            part(name, run(args, binary, out))
        comparisons = time.time() - started
        if not args.no_soak:
            part(PARTS["soak"][0], PARTS["soak"][1](args, binary, out))
        with open(f"{out}/run.txt", "w") as f:
            f.write(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}\n")
            f.write(f"parts 1-8: {comparisons:.0f} s\n")
            for name, seconds in took.items():
                f.write(f"{name}: {seconds:.0f} s\n")

    charts(out, os.path.join(out, "tmp"))
    soak_chart(out)
    versions = {
        "floodgate": version([binary, "--version"]),
        "g++": version(["g++", "--version"]),
        "redis-server": version(["redis-server", "--version"]),
        "nginx": version(["nginx", "-v"]),
        "wrk": version(["wrk", "-v"]),
        "node": version(["node", "--version"]),
    }
    with open(os.path.join(HERE, "express", "package-lock.json")) as f:
        lock = f.read()
    with open(os.path.join(HERE, "bottleneck", "package-lock.json")) as f:
        bottleneck_lock = f.read()
    for package, text in (("express", lock), ("rate-limiter-flexible", lock),
                          ("bottleneck", bottleneck_lock)):
        found = re.search(r'"node_modules/%s":\s*\{\s*"version":\s*"([^"]+)"' % package, text)
        versions[package] = found.group(1) if found else "?"
    write_headline(out)
    run_info = open(f"{out}/run.txt").read()
    sections = ["memory_matrix.md", "memory.md", "redis.md", "cluster.md", "http.md",
                "multi_memory.md", "multi_redis.md", "http_multi.md", "rls.md", "rls_counters.md",
                "reservations.md", "fleet.md", "authz_hold.md",
                "accuracy.md",
                "soak.md"]
    md = ["# floodgate benchmark report\n",
          f"Machine: {machine()}. The client and the servers share these cores.\n",
          "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".\n",
          "Run: " + "; ".join(run_info.strip().splitlines()) + ".\n",
          "Every figure is a median of several runs; every ratio is taken within one run, "
          "the two sides back to back, so machine noise cancels. Regenerate with `make bench`.\n",
          open(os.path.join(out, "headline.md")).read().replace("### ", "## ", 1),
          "![throughput](throughput.png)\n", "![latency](latency.png)\n",
          "![accuracy](accuracy.png)\n", "![http](http.png)\n"]
    for section in sections:
        if os.path.exists(os.path.join(out, section)):
            md.append(open(os.path.join(out, section)).read().replace("### ", "## ", 1))
    json_lines = [l for l in open(f"{out}/json.txt").read().splitlines() if "_median" in l]
    md.append("## JSON parsing\n\n`bench/json_bench`, medians of 5 repetitions:\n\n```\n" +
              "\n".join(json_lines) + "\n```\n")
    if os.path.exists(f"{out}/config.txt"):
        config_lines = [l for l in open(f"{out}/config.txt").read().splitlines()
                        if "_median" in l or "_BigO" in l or "_RMS" in l]
        md.append("## Config loading\n\n`bench/config_bench`, medians of 3 repetitions; "
                  "ParseConfig against YAML::Load of the same text, and the fit to O(N):\n\n```\n" +
                  "\n".join(config_lines) + "\n```\n")
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write("\n".join(md))
    # The full report, then the README's headline block.
    for document in ("docs/benchmarks.md", "README.md"):
        fill_markers(os.path.join(HERE, "..", document), out)
    print(f"wrote {out}/latest.md, headline.md, the charts, docs/benchmarks.md's tables and "
          "the README's headline", file=sys.stderr)


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def write_headline(out):
    """bench/results/headline.md: one row per comparison, each computed from a part's CSV
    (a part whose CSV is missing gives no row), with its target and whether the run met
    it, for the README to show."""
    def rows_of(name):
        path = os.path.join(out, name)
        return read_csv(path) if os.path.exists(path) else []

    rows = []

    def add(what, values, target=None, unit="x"):
        """`values`: the ratios the row stands for (a range when several); `target`:
        (">=" or "<=", bound) or None."""
        if not values:
            return
        low, high = min(values), max(values)
        result = f"{low:.2f}{unit}" if f"{low:.2f}" == f"{high:.2f}" \
            else f"{low:.2f}-{high:.2f}{unit}"
        if target is None:
            rows.append((what, f"**{result}**", "-", "-"))
            return
        op, bound = target
        meets = [v >= bound if op == ">=" else v <= bound for v in values]
        met = "yes" if all(meets) else ("no" if not any(meets) else "in part")
        rows.append((what, f"**{result}**", f"{op} {bound:g}{unit}", met))

    add("`memory://` (`Limiter::Check` under a `PreparedPolicy`) against a bare sharded map "
        "doing only a gcra decision (100,000 keys, uniform and Zipf, 1 and 2 threads)",
        [float(r["ratio"]) for r in rows_of("memory.csv") if r["kind"] == "throughput"],
        (">=", 0.9))
    redis = rows_of("redis.csv")
    add("Redis, batching on, against `redis-benchmark` running the leanest single-decision "
        "script at its best depth (every algorithm, 1 and 100,000 keys)",
        [float(r["ratio_on"]) for r in redis], (">=", 1.5))
    add("Redis CPU per decision of floodgate's batch script, against the least Lua deciding "
        "the same batches (gcra, 1 and 100,000 keys)",
        [float(r["batch_script_over_bare"]) for r in redis if r.get("batch_script_over_bare")])
    add("HTTP requests/s on `memory://` against nginx `limit_req` (`/v1/authz`, `/v1/check`)",
        [float(r["ratio_to_nginx"]) for r in rows_of("http.csv")
         if r["server"] == "floodgate memory"], (">=", 1.0))
    add("HTTP requests/s on Redis against Express + rate-limiter-flexible on the same Redis",
        [float(r["rps_ratio"]) for r in rows_of("http_vs_express.csv")])
    rls = [float(r["ratio"]) for r in rows_of("rls.csv")]
    add("Envoy RLS v3 (gRPC) requests/s against `/v1/check` (median of the rounds)",
        [median(rls)] if rls else [], (">=", 0.8))
    counters = [float(r["ratio"]) for r in rows_of("rls_counters.csv")]
    add("RLS on Redis: upstream's counters against floodgate's own fixed window, requests/s "
        "(median of the rounds)", [median(counters)] if counters else [], (">=", 0.9))
    add("Two limits in one decision against one: one-limit rate over two-limit rate "
        "(`memory://` 1 and 2 threads, Redis, Redis Cluster)",
        [float(r["cost_ratio"]) for r in rows_of("multi_memory.csv")] +
        sorted({float(r["cost_ratio_one_over_two"]) for r in rows_of("multi_redis.csv")}),
        ("<=", 1.3))
    http_multi = [float(r["rps_ratio"]) for r in rows_of("http_multi.csv")]
    add("Two limits over HTTP against nginx with two `limit_req` zones (median of the rounds)",
        [median(http_multi)] if http_multi else [], (">=", 1.0))
    reservations = rows_of("reservations.csv")
    for label, ratio in (("A reserve + settle", "reserve + settle / check"),
                         ("An acquire + release", "acquire + release / check (gcra)")):
        add(f"{label} against one gcra check (`memory://`, Redis batched)",
            [float(r["ratio_median"]) for r in reservations if r["ratio"] == ratio], ("<=", 2.2))
    prefetch = rows_of("prefetch.csv")
    add("Prefetch, one hot key, 4 processes: `prefetch=auto` decisions/s over without",
        sorted({float(r["auto_over_off"]) for r in prefetch if r["keys"] == "1"}), (">=", 10))
    add("Prefetch, 100,000 uniform keys, 4 processes: `prefetch=auto` decisions/s over without",
        sorted({float(r["auto_over_off"]) for r in prefetch if r["keys"] != "1"}), (">=", 0.9))
    fleet = rows_of("fleet.csv")
    if fleet:
        def median_of(limiter, column):
            return median([float(r[column]) for r in fleet if r["limiter"] == limiter])
        add("Throttled fleet, 4 processes on one Redis key offered 3x `gcra:1000/1s,burst=20,"
            "delay=1s`: rate at proceed times / 1000/s (fullest 1 s window "
            f"{median_of('floodgate', 'max_window'):,.0f}, allowed 1,020; npm bottleneck "
            f"{median_of('bottleneck', 'rate'):,.0f}/s)",
            [median_of("floodgate", "rate") / 1000], (">=", 0.99))
    atomic = {r["algorithm"]: float(r["over_pct"]) for r in rows_of("accuracy.csv")
              if r["part"] == "atomicity"}
    if "floodgate" in atomic:
        naive = [v for name, v in atomic.items() if name != "floodgate"]
        add("Over-admission, 4 concurrent clients on one Redis key" +
            (f" (a read, decide, write back limiter: {naive[0]:.1f}%)" if naive else ""),
            [atomic["floodgate"]], ("<=", 0), unit="%")
    lines = ["### Headline ratios\n",
             "Each ratio is taken within one run, the two sides back to back, as a median of "
             "several rounds; a range spans the rows of the table behind it "
             "(docs/benchmarks.md).\n",
             "| comparison | result | target | met |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    with open(os.path.join(out, "headline.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def fill_markers(document, out):
    """Replaces what stands between `<!-- bench:FILE -->` and `<!-- /bench:FILE -->` in
    `document` with bench/results/FILE, so that every number it quotes comes from the last
    run. A marker naming a file the run did not write is an error: the document would
    otherwise keep quoting an older run."""
    text = open(document).read()
    shown = os.path.relpath(document, os.path.join(HERE, ".."))
    # Images the parts name by file name alone sit beside them in `out`.
    images = os.path.relpath(out, os.path.dirname(os.path.abspath(document)))

    def fill(match):
        name = match.group(1)
        path = os.path.join(out, name)
        if not os.path.exists(path):
            raise SystemExit(f"report: {shown} shows {name}, which this run did not write")
        # The parts' "###" titles stay "###": both documents put them under "##" sections.
        table = open(path).read().strip()
        table = re.sub(r"\]\(([\w.-]+\.png)\)", lambda m: f"]({images}/{m.group(1)})", table)
        return f"<!-- bench:{name} -->\n{table}\n<!-- /bench:{name} -->"

    text = re.sub(r"<!-- bench:(\S+) -->\n.*?<!-- /bench:\1 -->", fill, text, flags=re.S)
    with open(document, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
