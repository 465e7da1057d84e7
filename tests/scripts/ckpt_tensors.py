#!/usr/bin/env python3
"""Whole tensors of a tessera checkpoint, assembled from its shards.

ckpt_tensors.py same STEP_DIR_A STEP_DIR_B: every tensor's parameters and
AdamW moments (exp_avg, exp_avg_sq) in the two checkpoints, each assembled
into its global shape from the pieces every rank wrote (metadata.json:
file, byte_offset, local_range and the slice's blocks, ckpt/slice_map.h),
are equal bit for bit, and every element of each is written by some rank.
Exit 1 naming the first difference. The layouts that wrote A and B may
differ (tp, pp, dp, ep, ZeRO stage): this is what a reshard must keep.
"""
import json
import os
import sys

import numpy as np

KINDS = ("params", "exp_avg", "exp_avg_sq")


def local_to_global(blocks, global_shape):
    """Global flat index of each local element: the blocks, one after
    another, each row-major (SliceMap)."""
    out = []
    gshape = tuple(global_shape)
    for b in blocks:
        start, shape = b["start"], b["shape"]
        grids = np.meshgrid(*[np.arange(s, s + n) for s, n in zip(start, shape)], indexing="ij")
        out.append(np.ravel_multi_index(tuple(g.ravel() for g in grids), gshape))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def assemble(step_dir):
    md = json.load(open(os.path.join(step_dir, "metadata.json")))
    tensors = {}
    for name, t in md["tensors"].items():
        shape = t["global_shape"]
        n = int(np.prod(shape))
        for kind in KINDS:
            pieces = t["shards"].get(kind, [])
            if not pieces:
                continue
            val = np.zeros(n, dtype=np.uint32)  # the bits
            seen = np.zeros(n, dtype=bool)
            for p in pieces:
                lo, hi = p["local_range"]
                idx = local_to_global(p["slice"]["blocks"], shape)[lo:hi]
                with open(os.path.join(step_dir, p["file"]), "rb") as f:
                    f.seek(p["byte_offset"])
                    bits = np.frombuffer(f.read(4 * (hi - lo)), dtype=np.uint32)
                if seen[idx].any():  # replicas must agree
                    both = seen[idx]
                    assert (val[idx][both] == bits[both]).all(), f"{step_dir}: {name} {kind} replicas differ"
                val[idx] = bits
                seen[idx] = True
            assert seen.all(), f"{step_dir}: {name} {kind}: {int((~seen).sum())} of {n} elements unwritten"
            tensors[(name, kind)] = val
    return md, tensors


def main():
    assert sys.argv[1] == "same", __doc__
    a_dir, b_dir = sys.argv[2], sys.argv[3]
    (ma, a), (mb, b) = assemble(a_dir), assemble(b_dir)
    assert ma["step"] == mb["step"], f"steps {ma['step']} vs {mb['step']}"
    assert sorted(a) == sorted(b), f"tensors differ: {sorted(set(a) ^ set(b))[:4]}"
    for key in sorted(a):
        if not np.array_equal(a[key], b[key]):
            diff = int((a[key] != b[key]).sum())
            sys.exit(f"{key[0]} {key[1]}: {diff} of {a[key].size} elements differ")
    kinds = sorted({k for _, k in a})
    print(f"ok: {len(a)} tensors ({', '.join(kinds)}) equal bit for bit")


if __name__ == "__main__":
    main()
