#!/usr/bin/env python3
"""Reads one client's output and prints "SUCCEEDED REQ_PER_S" (bench/run).

Usage: count.py TOOL FILE [SECONDS]
TOOL is httpvs (--json report), h2load, wrk, oha (--output-format json) or floor
(bench/floor/h1-floor). For oha the rate is
SUCCEEDED / SECONDS: its h3 mode lingers ~30 s after the run (oha#835), so its own figure is off.
"""
import json
import re
import sys


def httpvs(text, _):
    report = json.loads(text)
    ok = report["requests"]["succeeded"]
    return ok, report["throughput"]["succeeded_per_s"]


def h2load(text, _):
    ok = int(re.search(r"(\d+) succeeded", text).group(1))
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", text).group(1))
    return ok, rps


def wrk(text, _):
    total = int(re.search(r"(\d+) requests in", text).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    ok = total - (int(bad.group(1)) if bad else 0)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    return ok, rps * ok / total if total else 0.0


def floor(text, _):
    m = re.search(r"(\d+) requests in [\d.]+ s, ([\d.]+) req/s, (\d+) non-2xx", text)
    total, bad = int(m.group(1)), int(m.group(3))
    rps = float(m.group(2))
    return total - bad, rps * (total - bad) / total if total else 0.0


def oha(text, seconds):
    codes = json.loads(text).get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if k.startswith("2"))
    return ok, ok / float(seconds)


def main():
    tool, path = sys.argv[1], sys.argv[2]
    seconds = sys.argv[3] if len(sys.argv) > 3 else "1"
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        ok, rps = {"httpvs": httpvs, "h2load": h2load, "wrk": wrk, "oha": oha, "floor": floor}[tool](text, seconds)
    except (AttributeError, KeyError, ValueError):
        ok, rps = 0, 0.0
    print(ok, f"{rps:.0f}")


if __name__ == "__main__":
    main()
