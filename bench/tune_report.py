#!/usr/bin/env python3
"""The tables of bench/tune.sh from its trial logs (see tune.sh for the runs).

Usage: tune_report.py OUT_DIR SEEDS RANKS...
       tune_report.py --refine-set OUT_DIR SEEDS RANKS TOP
The second form prints, one per line, the flags of the layouts the next
round of tune.sh's refinement measures again: the TOP fastest by the truth
so far, every layout within 10 % of its best, and every layout a tuner run
or a random search would return at some budget.
"""
import glob
import json
import math
import os
import random
import statistics
import sys

BUDGETS = (3, 5, 8)
WITHIN = 1.05  # a layout within 5 % of the truth's best counts as found
# The refinement measures every layout this close to the truth's best so
# far again: on the 2-rank AMD host the best of three measurements rose 19 %
# on four more, so a layout ranked fifth could end up first.
REFINE_WITHIN = 1.10
# A truth's best on fewer measurements than this is warned of: on 4 ranks
# the best after six refinement rounds, 167.0 ms on eight measurements (a
# run of fast phases), measured 186.9 ms on fourteen.
SETTLED = 12


def trials(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def pick(seq, budget):
    """The trial a search returns after its first `budget` trials: its
    fastest ok trial by its own measurement (None if none ran)."""
    ok = [t for t in seq[:budget] if t["status"] == "ok"]
    return min(ok, key=lambda t: t["measured"]) if ok else None


def search_outcome(seq, truth, best):
    """For one search's trials in order: per budget, whether the layout it
    would return is within 5 % of the best by the truth; and the trial count
    until the first layout within 5 % (None if none in the sequence)."""
    found = {}
    for b in BUDGETS:
        p = pick(seq, b)
        found[b] = p is not None and truth.get(p["layout"], p["measured"]) <= WITHIN * best
    first = next((k + 1 for k, t in enumerate(seq)
                  if t["status"] == "ok" and truth.get(t["layout"], math.inf) <= WITHIN * best), None)
    return found, first


def pct(x):
    return f"{100 * x:5.1f} %"


def measurements(paths):
    """layout -> every ok measurement of it in these tune logs."""
    runs = {}
    for path in paths:
        for t in trials(path):
            if t["status"] == "ok":
                runs.setdefault(t["layout"], []).append(t["measured"])
    return runs


def verdicts(tuner_seqs, rand_seqs, truth, best=None):
    """Per budget, the share of tuner and random searches that return a
    layout within 5 % of `best` (default the truth's best); and the
    outcomes themselves."""
    best = min(truth.values()) if best is None else best
    tuner = [search_outcome(seq, truth, best) for seq in tuner_seqs]
    rand = [search_outcome(seq, truth, best) for seq in rand_seqs]
    share = {b: (sum(r[0][b] for r in tuner) / len(tuner), sum(r[0][b] for r in rand) / len(rand))
             for b in BUDGETS}
    return share, tuner, rand


def medians(runs):
    return {layout: statistics.median(ms) for layout, ms in runs.items()}


def random_searches(exhaustive, seeds):
    """Random search over the exhaustive pass: each seed draws layouts
    without replacement, each drawn layout's time its pass-1 trial."""
    return [random.Random(s).sample(exhaustive, min(max(BUDGETS), len(exhaustive)))
            for s in range(seeds)]


def logs(out, n):
    """One rank count's logs: pass 1, the paths of every pass, of the tuner
    runs and of the refinement rounds."""
    base = f"{out}/n{n}"
    return (trials(f"{base}/pass1/tune.jsonl"), sorted(glob.glob(f"{base}/pass*/tune.jsonl")),
            sorted(glob.glob(f"{base}/tune*/tune.jsonl")),
            sorted(glob.glob(f"{base}/refine*/tune.jsonl")))


def refine_set(out, n, seeds, top):
    """The flags of the layouts to measure again (module doc): the truth's
    best is the minimum over many layouts' medians of a few noisy
    measurements, so it is biased low, and so is any pick's luck; both are
    settled by more measurements of exactly those layouts."""
    exhaustive, passes, tuner_paths, refine_paths = logs(out, n)
    truth = medians(measurements(passes + tuner_paths + refine_paths))
    best = min(truth.values())
    ranked = sorted(truth, key=truth.get)
    chosen = ranked[:top] + [l for l in ranked[top:] if truth[l] <= REFINE_WITHIN * best]
    for seq in [trials(p) for p in tuner_paths] + random_searches(exhaustive, seeds):
        for b in BUDGETS:
            p = pick(seq, b)
            if p is not None and p["layout"] not in chosen:
                chosen.append(p["layout"])
    flags = {t["layout"]: t["flags"] for t in exhaustive}
    return [flags[layout] for layout in chosen if layout in flags]


def print_noise(runs, what):
    """The spread of each layout's measurements in `runs` (layout -> list),
    over the layouts measured more than once. (max - min) / mean grows with
    the measurements of a layout; the standard deviation over the mean does
    not."""
    many = [ms for ms in runs.values() if len(ms) > 1]
    if not many:
        return
    spreads = [(max(ms) - min(ms)) / statistics.mean(ms) for ms in many]
    cv = [statistics.stdev(ms) / statistics.mean(ms) for ms in many]
    counts = sorted({len(ms) for ms in many})
    times = f"{counts[0]}" + (f"-{counts[-1]}" if len(counts) > 1 else "")
    print(f"noise, {what}: {len(many)} layouts measured {times} times; (max - min) / "
          f"mean: median {pct(statistics.median(spreads))}, max {pct(max(spreads))}; "
          f"sd / mean: median {pct(statistics.median(cv))}")


def report(out, n, seeds):
    exhaustive, passes, tuner_paths, refine_paths = logs(out, n)
    tuner_seqs = [trials(p) for p in tuner_paths]
    # The truth: the median of every measurement of a layout (tune.sh).
    runs = measurements(passes + tuner_paths + refine_paths)
    truth = medians(runs)
    # The exhaustive passes alone, each layout measured as often as any.
    runs_before = measurements(passes)
    truth_before = medians(runs_before)
    refined = measurements(refine_paths)
    best_layout = min(truth, key=truth.get)
    best = truth[best_layout]
    near = sorted(l for l, v in truth.items() if v <= WITHIN * best)
    failed = [t for t in exhaustive if t["status"] != "ok"]
    cores = os.cpu_count()
    print(f"\n== {n} ranks{' (oversubscribed on ' + str(cores) + ' cores)' if n > cores else ''}: "
          f"{len(exhaustive)} layouts in the search space, {len(failed)} failed")
    print(f"truth's best: {best_layout} at {best * 1e3:.1f} ms/step (median of "
          f"{len(runs[best_layout])}); {len(near)} layout(s) within 5 %: " + "; ".join(near))
    if refine_paths:
        unrefined = medians(measurements(passes + tuner_paths))
        first = min(unrefined, key=unrefined.get)
        print(f"refinement: {len(refined)} layouts measured again in {len(refine_paths)} rounds; "
              f"before it the truth's best was {first} at {unrefined[first] * 1e3:.1f} ms "
              f"(now {truth[first] * 1e3:.1f} ms, median of {len(runs[first])})")
        again = len(refined.get(best_layout, []))
        if again < len(refine_paths):
            print(f"WARNING: the truth's best was measured again in {again} of the "
                  f"{len(refine_paths)} rounds only (it came near the top as others rose)")
    # Noise: the spread of each layout over the passes, and of the refined
    # layouts over the passes and the rounds; then what pass 1 alone would
    # have ranked the best.
    print_noise(runs_before, "the passes")
    if refined:
        print_noise({l: runs_before.get(l, []) + ms for l, ms in refined.items()}, "refined layouts")
    pass1 = {t["layout"]: t["measured"] for t in exhaustive if t["status"] == "ok"}
    p1_best = min(pass1, key=pass1.get)
    print(f"pass 1 alone would pick {p1_best} (truth {truth[p1_best] * 1e3:.1f} ms, "
          f"{pct(truth[p1_best] / best - 1)} above the best)")

    # Every layout the tuner tries should be in the exhaustive pass (the
    # same binary, the same space); one that is not is counted here.
    outside = sum(t["status"] == "ok" and t["layout"] not in pass1 for seq in tuner_seqs for t in seq)
    if outside:
        print(f"WARNING: {outside} tuner trial(s) ran layouts the exhaustive pass did not "
              f"(a different binary or space?)")
    rand_seqs = random_searches(exhaustive, seeds)
    share, tuner, rand = verdicts(tuner_seqs, rand_seqs, truth)
    share_before, _, _ = verdicts(tuner_seqs, rand_seqs, truth_before)
    tuner = [r + (seq,) for r, seq in zip(tuner, tuner_seqs)]
    # Random search's exact odds of drawing any layout within 5 % in b draws.
    N, K = len(exhaustive), len(near)

    def any_odds(b):
        return 1 - math.comb(N - K, b) / math.comb(N, b) if b <= N else 1.0

    print(f"{'budget':>6}  {'tuner finds':>12}  {'random finds':>13}  {'random, exact odds':>19}"
          f"  {'(truth of the passes alone: tuner, random)':>44}")
    for b in BUDGETS:
        tf, rf = share[b]
        print(f"{b:>6}  {pct(tf):>12}  {pct(rf):>13}  {pct(any_odds(b)):>19}"
              f"  {pct(share_before[b][0]):>21}, {pct(share_before[b][1])}")

    def mean_first(rs):
        hits = [r[1] for r in rs if r[1] is not None]
        return (f"{statistics.mean(hits):.1f} trials ({len(hits)} of {len(rs)} within "
                f"{max(BUDGETS)})" if hits else f"none within {max(BUDGETS)}")

    print(f"trials until the first layout within 5 %: tuner {mean_first(tuner)}; "
          f"random {mean_first(rand)}")
    # The planner's error on the tuner's ok trials.
    err_before, err_after, err_first = [], [], []
    for _, _, seq in tuner:
        for k, t in enumerate(seq):
            if t["status"] != "ok":
                continue
            err_before.append(abs(t["predicted_before"] / t["measured"] - 1))
            (err_first if k == 0 else err_after).append(abs(t["predicted_after"] / t["measured"] - 1))
    if err_before:
        print(f"planner error on the tuner's {len(err_before)} ok trials: "
              f"{pct(statistics.mean(err_before))} uncorrected; corrected from the trials before "
              f"each: {pct(statistics.mean(err_after)) if err_after else '-'} (trials 2-8)")
    # A best on few measurements is the likeliest to be a lucky one: the
    # verdicts again with the best of the layouts measured SETTLED times.
    if len(runs[best_layout]) < SETTLED:
        print(f"WARNING: the truth's best rests on {len(runs[best_layout])} measurement(s), "
              f"fewer than {SETTLED}: a minimum of many noisy medians is biased low")
        settled = {l: v for l, v in truth.items() if len(runs[l]) >= SETTLED}
        if settled:
            s_layout = min(settled, key=settled.get)
            s_share, _, _ = verdicts(tuner_seqs, rand_seqs, truth, settled[s_layout])
            print(f"  with the best of the layouts measured {SETTLED}+ times instead ({s_layout} at "
                  f"{settled[s_layout] * 1e3:.1f} ms), tuner / random finds at budgets 3 / 5 / 8: " +
                  " / ".join(pct(s_share[b][0]).strip() for b in BUDGETS) + "; " +
                  " / ".join(pct(s_share[b][1]).strip() for b in BUDGETS))
    tf5 = share[5][0]
    beats = all(share[b][0] > share[b][1] for b in BUDGETS)
    print(f"target (within 5 % in <= 5 trials in >= 90 % of repeats): "
          f"{'met' if tf5 >= 0.9 else 'NOT met'} ({pct(tf5)} of {len(tuner)} repeats); "
          f"beats random at every budget: {'yes' if beats else 'no'}")


def main():
    if sys.argv[1] == "--refine-set":
        out, seeds, n, top = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print("\n".join(refine_set(out, n, seeds, top)))
        return
    out, seeds, ranks = sys.argv[1], int(sys.argv[2]), [int(r) for r in sys.argv[3:]]
    for n in ranks:
        report(out, n, seeds)


if __name__ == "__main__":
    main()
