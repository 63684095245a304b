#!/usr/bin/env python3
"""How much code one request runs through: distinct instructions and 64-byte cache lines.

Usage: hot-lines.py CALLGRIND_OUT REQUESTS [TOP]

CALLGRIND_OUT comes from `valgrind --tool=callgrind --dump-instr=yes --compress-pos=no
--compress-strings=no CLIENT ...` over a run of REQUESTS requests. An instruction counts as on a
request's path when it ran at least once per two requests. Prints their number, the 64-byte
lines they span, and the instructions a request runs on them; then the TOP functions (default
15) by lines. After the kernel's work for a request has evicted the L1 instruction cache, those
lines are what a request fetches again (README, Performance).
"""
import collections
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2])
    path, requests = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) == 4 else 15
    count, owner = collections.Counter(), {}
    function, after_call = None, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                function = line[3:].strip()
            elif line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not an instruction's own.
                after_call = True
            elif line.startswith("0x"):
                parts = line.split()
                if not after_call and len(parts) >= 3:
                    address = int(parts[0], 16)
                    count[address] += int(parts[2])
                    owner[address] = function
                after_call = False
            else:
                after_call = False
    hot = [a for a, n in count.items() if n * 2 >= requests]
    lines = {a >> 6 for a in hot}
    runs = sum(count[a] for a in hot)
    print(f"{len(hot)} instructions on a request's path, spanning {len(lines)} lines "
          f"({len(lines) * 64} B); {runs / requests:.0f} instructions run per request")
    by_function = collections.defaultdict(set)
    for a in hot:
        by_function[owner[a]].add(a >> 6)
    for name, spans in sorted(by_function.items(), key=lambda kv: -len(kv[1]))[:top]:
        print(f"{len(spans):5} lines  {name[:110]}")


if __name__ == "__main__":
    main()
