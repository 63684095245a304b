#!/usr/bin/env python3
"""Runs one client command and measures it the way bench/run compares clients.

Usage: measure.py [--cpu N] [--sample-rss SECS] [--hold SECS] PREFIX -- CMD...

Writes CMD's stdout and stderr to PREFIX.out / PREFIX.err and prints one JSON line:
user and sys CPU seconds from wait4 on the child, its peak RSS (VmHWM, KiB, read every 20 ms),
the wall time, the exit code, and with --sample-rss the child's VmRSS (KiB) every SECS
seconds. With --hold SECS the child is sent SIGINT after SECS seconds (for runs that
would otherwise go on), and "rss_at_hold" is its VmRSS just before.
"""
import json
import os
import signal
import subprocess
import sys
import time


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def vm_rss_kib(pid):
    return status_kib(pid, "VmRSS")


def main(argv):
    cpu, sample, hold = None, None, None
    while argv and argv[0].startswith("--"):
        flag, value = argv[0], argv[1]
        argv = argv[2:]
        if flag == "--cpu":
            cpu = value
        elif flag == "--sample-rss":
            sample = float(value)
        elif flag == "--hold":
            hold = float(value)
        else:
            sys.exit(f"measure.py: unknown flag {flag}")
    prefix, sep, cmd = argv[0], argv[1], argv[2:]
    if sep != "--" or not cmd:
        sys.exit("usage: measure.py [--cpu N] [--sample-rss S] [--hold S] PREFIX -- CMD...")
    if cpu is not None:
        cmd = ["taskset", "-c", cpu, *cmd]
    started = time.monotonic()
    with open(prefix + ".out", "wb") as out, open(prefix + ".err", "wb") as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err)
        samples, rss_at_hold, peak = [], None, 0
        next_sample = started + (sample or 0)
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            # VmHWM, read until the end: wait4's ru_maxrss would include the RSS the child
            # had as a fork of this Python process before it exec'd the client.
            peak = max(peak, status_kib(child.pid, "VmHWM") or 0)
            now = time.monotonic()
            if sample and now >= next_sample:
                samples.append(vm_rss_kib(child.pid))
                next_sample += sample
            if hold is not None and rss_at_hold is None and now - started >= hold:
                rss_at_hold = vm_rss_kib(child.pid)
                child.send_signal(signal.SIGINT)
            time.sleep(0.02)
    print(json.dumps({
        "user": usage.ru_utime,
        "sys": usage.ru_stime,
        "maxrss_kib": peak,
        "wall": time.monotonic() - started,
        "rc": os.waitstatus_to_exitcode(status),
        "rss_samples": samples,
        "rss_at_hold": rss_at_hold,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
