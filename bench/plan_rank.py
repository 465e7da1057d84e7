#!/usr/bin/env python3
"""How well a planner system file ranks the layouts a tune bench measured.

usage: bench/plan_rank.py TESSERA BENCH_DIR/nN [SYSTEM.toml]

Predicts every pass-1 trial of a bench/tune.sh run (its metrics files,
through `tessera plan --validate`) on SYSTEM (default: the bench's own
calibration, nN/local.toml) and scores the predictions against the bench's
truth (each layout's median over every measurement the bench took: passes,
tuner trials, refinement rounds): the median planned / measured step, the
rank correlation (Spearman), and how many of the planner's first k layouts
are within 5 and 10 % of the measured best. A planner that the tuner can
follow puts the fast layouts first; its absolute error the tuner corrects.
"""
import glob
import os
import re
import statistics
import subprocess
import sys

from tune_report import WITHIN, measurements, medians


def predictions(tessera, bench, system):
    files = sorted(glob.glob(os.path.join(bench, "pass1", "trial_*.jsonl")))
    out = subprocess.run([tessera, "plan", "--system", system, "--validate", *files],
                         capture_output=True, text=True, check=True).stdout
    # "trial_001.jsonl  tp 1 pp 2 ... 1f1b ogr opg   194.1   399.2 +105.6%  ..."
    row = re.compile(r"^\S+\s+(tp .*?)\s+([\d.]+)\s+([\d.]+)\s+[+-]")
    return {m.group(1): float(m.group(3)) / 1e3 for m in map(row.match, out.splitlines()) if m}


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0] * len(xs)
    for k, i in enumerate(order):
        r[i] = k
    return r


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    tessera, bench = sys.argv[1], sys.argv[2]
    system = sys.argv[3] if len(sys.argv) == 4 else os.path.join(bench, "local.toml")
    # Every measurement the bench took: its passes, tuner runs and rounds.
    truth = medians(measurements(glob.glob(os.path.join(bench, "*", "tune.jsonl"))))
    pred = predictions(tessera, bench, system)
    layouts = [layout for layout in truth if layout in pred]
    if len(layouts) < 2:
        sys.exit(f"{bench}: fewer than 2 layouts both measured and predicted")
    best = min(truth[layout] for layout in layouts)
    n = len(layouts)
    a = ranks([truth[layout] for layout in layouts])
    b = ranks([pred[layout] for layout in layouts])
    rho = 1 - 6 * sum((x - y) ** 2 for x, y in zip(a, b)) / (n * (n * n - 1))
    ratio = statistics.median(pred[layout] / truth[layout] for layout in layouts)
    print(f"{system}: {n} layouts, measured best {best * 1e3:.1f} ms; planned / measured "
          f"{ratio:.2f} (median); rank correlation {rho:.3f}")
    order = sorted(layouts, key=lambda layout: pred[layout])
    for k in (1, 3, 5, 8, 20):
        top = order[:k]
        near = min(truth[layout] for layout in top) / best - 1
        print(f"  planner's first {k:2d}: the fastest of them {100 * near:5.1f} % above the best; "
              f"within 5 %: {sum(truth[layout] <= WITHIN * best for layout in top):2d}, "
              f"within 10 %: {sum(truth[layout] <= 1.10 * best for layout in top):2d}")


if __name__ == "__main__":
    main()
