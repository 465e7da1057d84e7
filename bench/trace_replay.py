#!/usr/bin/env python3
"""Replays a pipeline step's --trace through the schedule simulator's rules.

Usage: bench/trace_replay.py TRACE.json [...]   (tessera train --trace FILE)

The simulator (src/tessera/parallel/schedule_sim.h) runs each rank's list in
order: compute takes its cost, a Send costs nothing and makes the data usable
`latency` later, a Recv ends at max(now, arrival). Here the costs are the
trace's own measured durations, so what is left between the replay and the
trace is what the simulator's dependency model does not have: if the ends
and waits agree, the planner's error is in its per-action costs, not in the
order or the waits. Prints per rank and kind the measured durations (ms),
the send -> receive latency where the receiver was already waiting, the
untimed gaps between a rank's actions, and the measured and replayed ends
and waits (latency 0 and the median measured one).
"""
import json
import re
import statistics
import sys

STEP_LEVEL = ("ReduceGrads", "OptimizerStep")


def load(path):
    """Per rank, [(start_ms, end_ms, name)] from the earliest span."""
    d = json.load(open(path))
    events = d["traceEvents"] if isinstance(d, dict) else d
    ranks = {}
    for e in events:
        if e.get("ph") == "X":
            ranks.setdefault(e["pid"], []).append((e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3, e["name"]))
    spans = [sorted(ranks[r]) for r in sorted(ranks)]
    t0 = min(s for r in spans for s, _, _ in r)
    return [[(s - t0, e - t0, n) for s, e, n in r] for r in spans]


def message(name):
    """('act' | 'grad', micro-batch, chunk) of a transfer; None otherwise."""
    m = re.match(r"(Send|Recv)(Act|Grad) mb(\d+) c(\d+)", name)
    return (m.group(2).lower(), int(m.group(3)), int(m.group(4))) if m else None


def replay(spans, latency):
    """Each rank from its first span's start; returns (ends, waits) per rank."""
    n = len(spans)
    t = [r[0][0] for r in spans]
    pc, wait, sent = [0] * n, [0.0] * n, {}
    progress = True
    while progress:
        progress = False
        for r in range(n):
            while pc[r] < len(spans[r]):
                s, e, name = spans[r][pc[r]]
                if name in STEP_LEVEL:
                    pc[r] = len(spans[r])
                    break
                if name.startswith("Recv"):
                    # A receive and its send name the same boundary from its two chunks.
                    key = [k for k in sent if k[:2] == message(name)[:2]]
                    if not key:
                        break
                    arrival = sent.pop(key[0]) + latency
                    wait[r] += max(0.0, arrival - t[r])
                    t[r] = max(t[r], arrival)
                elif name.startswith("Send"):
                    sent[message(name)] = t[r]
                else:
                    t[r] += e - s
                pc[r] += 1
                progress = True
    return t, wait


def report(path):
    spans = load(path)
    print(path)
    kinds = {}
    for r, rs in enumerate(spans):
        for s, e, name in rs:
            kind = name.split()[0]
            if kind in ("F", "B", "BI", "W"):
                kinds.setdefault((r, kind), []).append(e - s)
    for (r, kind), v in sorted(kinds.items()):
        print(f"  rank {r} {kind:2s} ms: " + " ".join(f"{x:.1f}" for x in v))
    sends = {message(n)[:2]: e for rs in spans for s, e, n in rs if n.startswith("Send")}
    lat = [e - sends[message(n)[:2]] for rs in spans for s, e, n in rs
           if n.startswith("Recv") and message(n)[:2] in sends and sends[message(n)[:2]] > s]
    print("  latency (send -> receive end, receiver waiting) ms: " + " ".join(f"{x:.2f}" for x in lat))
    for r, rs in enumerate(spans):
        gaps = [(rs[i + 1][0] - rs[i][1], rs[i][2]) for i in range(len(rs) - 1)
                if rs[i + 1][2] not in STEP_LEVEL]
        big = "; ".join(f"{g:.1f} after {n}" for g, n in gaps if g > 0.5)
        print(f"  rank {r} starts at {rs[0][0]:.1f}, untimed gaps {sum(g for g, _ in gaps):.1f} ms"
              + (f": {big}" if big else ""))
    ends = [max(e for s, e, n in rs if n not in STEP_LEVEL) for rs in spans]
    waits = [sum(e - s for s, e, n in rs if n.startswith("Recv")) for rs in spans]
    print("  measured: end " + " ".join(f"{x:.1f}" for x in ends) + " | wait " + " ".join(f"{x:.1f}" for x in waits))
    for latency in sorted({0.0, statistics.median(lat) if lat else 0.0}):
        end, wait = replay(spans, latency)
        print(f"  replayed (latency {latency:.2f}): end " + " ".join(f"{x:.1f}" for x in end)
              + " | wait " + " ".join(f"{x:.1f}" for x in wait))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        report(p)
