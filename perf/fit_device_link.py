#!/usr/bin/env python3
"""The tuner's model of the device link (STRATA_LINK_MODEL's `device` level: latency and
bandwidth between device buffers of one node), fitted to strata-perf all_reduce tables
on device buffers (tools/gpu-check's perf_threads steps):

    fit_device_link.py LOG [LOG...]

The latency is the smallest message's time (the tuner sends a small device all_reduce
as one round, `direct`); the bandwidth is the largest message's bus bandwidth (the ring
the tuner picks there moves busbw through each link). Prints one line per table and the
setting from the table with the most ranks:  STRATA_LINK_MODEL=device:<us>us:<GB>GB
"""
import re
import sys


def fit(text):
    """(ranks, latency_us, busbw_GBps) of one strata-perf table, or None."""
    ranks = re.search(r"(\d+) ranks", text)
    rows = []
    for line in text.splitlines():
        f = line.split()
        if f and f[0].startswith("[") and f[0].endswith("]"):
            f = f[1:]  # strata-run's rank prefix
        if len(f) >= 8 and f[0].isdigit() and f[1].isdigit():
            try:
                rows.append((int(f[0]), float(f[5]), float(f[7])))  # size, time us, busbw
            except ValueError:
                pass
    if not ranks or not rows:
        return None
    rows.sort()
    return int(ranks.group(1)), rows[0][1], rows[-1][2]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    best = None
    for path in sys.argv[1:]:
        try:
            with open(path, errors="replace") as f:
                got = fit(f.read())
        except OSError as e:
            print("%s: %s" % (path, e.strerror))
            continue
        if not got:
            print("%s: no strata-perf table" % path)
            continue
        n, lat, bw = got
        print("%s: %d ranks, smallest message %.1f us, largest message busbw %.2f GB/s" % (path, n, lat, bw))
        if best is None or n > best[0]:
            best = got
    if best is None:
        return 1
    print("STRATA_LINK_MODEL=device:%.3gus:%.3gGB" % (best[1], max(best[2], 0.001)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
