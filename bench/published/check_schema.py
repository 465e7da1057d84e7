#!/usr/bin/env python3
"""Checks bench/published/*.toml against the published-runs format (the
planner's parser reads exactly that format; this is the stdlib-only check to
run before committing a file). Usage: python3 bench/published/check_schema.py
[files...]; with no files, every *.toml beside this script. Exit 0 when all
pass, 1 with one line per problem otherwise."""
import glob
import os
import re
import sys
import tomllib

# The shipped datasheet systems (configs/systems, this machine's `local` aside).
_SYSTEMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "systems")
SYSTEMS = {os.path.basename(f)[:-5] for f in glob.glob(os.path.join(_SYSTEMS_DIR, "*.toml"))} - {"local"}
FLOPS = {"megatron-2021", "megatron-model", "6nd", "6nd-attn", "6nd-noembed-attn"}
# The measured figure: exactly one of these per run.
FIGURES = ["step-seconds", "tokens-per-second", "tokens-per-second-per-device", "tflops-per-device", "mfu"]
REQUIRED_INT = ["devices", "tensor-model-parallel-size", "pipeline-model-parallel-size",
                "micro-batch-size", "global-batch-size", "zero-stage"]
REQUIRED = REQUIRED_INT + ["name", "system", "recompute", "precision", "flash-attention",
                           "sequence-parallel", "inferred", "note"]
OPTIONAL = {"pipeline-schedule", "virtual-stages", "overlap-grad-reduce", "overlap-param-gather",
            "tp-comm-overlap", "grad-reduce-dtype", "optimizer", "attention-kernel", "eager-elementwise",
            "fsdp-flat-params", "torchtitan-op-sac", "fsdp2-pipelining", "dropout", "fp8-recipe", "excluded",
            "model", "peak-tflops", "flops", "memory-gb", "decoder-first-pipeline-num-layers",
            "decoder-last-pipeline-num-layers"}
MODEL_INT = {"num-layers", "hidden-size", "num-attention-heads", "seq-length", "vocab-size",
             "ffn-hidden-size", "max-position-embeddings", "make-vocab-size-divisible-by",
             "num-query-groups"}
MODEL_OTHER = {"normalization", "norm-epsilon", "swiglu", "position-embedding-type", "rotary-base",
               "group-query-attention", "untie-embeddings-and-output-weights", "disable-bias-linear"}
MODEL_REQUIRED = ["num-layers", "hidden-size", "num-attention-heads", "seq-length"]
ALL_KEYS = set(REQUIRED) | OPTIONAL | set(FIGURES)


def check_run(r, src, where, problems):
    def bad(msg):
        problems.append(f"{where}: {msg}")

    for k in REQUIRED:
        if k not in r:
            bad(f"missing key '{k}'")
    for k in r:
        if k not in ALL_KEYS:
            bad(f"unknown key '{k}'")
    for k in REQUIRED_INT:
        if k in r and (not isinstance(r[k], int) or isinstance(r[k], bool) or r[k] < 0):
            bad(f"'{k}' must be a non-negative integer")
    if any(k not in r or not isinstance(r[k], int) for k in REQUIRED_INT):
        return
    if r.get("system") not in SYSTEMS:
        bad(f"system '{r.get('system')}' is not one of {sorted(SYSTEMS)}")
    tp, pp, dev = r["tensor-model-parallel-size"], r["pipeline-model-parallel-size"], r["devices"]
    if min(tp, pp, dev, r["micro-batch-size"], r["global-batch-size"]) < 1:
        bad("devices, tp, pp and the batch sizes must be >= 1")
        return
    if dev % (tp * pp):
        bad(f"devices {dev} not divisible by tp*pp = {tp * pp}")
        return
    dp = dev // (tp * pp)
    if r["global-batch-size"] % (r["micro-batch-size"] * dp):
        bad(f"global batch {r['global-batch-size']} not divisible by micro-batch x dp = "
            f"{r['micro-batch-size']} x {dp}")
    if r["zero-stage"] > 3:
        bad("zero-stage must be 0..3")
    if r.get("recompute") not in ("none", "selective", "full"):
        bad("recompute must be none|selective|full")
    if r.get("precision") not in ("fp16", "bf16", "fp8"):
        bad("precision must be fp16|bf16|fp8")
    for k in ("flash-attention", "sequence-parallel", "overlap-grad-reduce", "overlap-param-gather",
              "tp-comm-overlap", "eager-elementwise", "fsdp-flat-params",
              "torchtitan-op-sac", "fsdp2-pipelining", "dropout"):
        if k in r and not isinstance(r[k], bool):
            bad(f"'{k}' must be true or false")
    if "fp8-recipe" in r and (r["fp8-recipe"] not in ("te", "torchao") or r.get("precision") != "fp8"):
        bad("fp8-recipe must be te|torchao, with precision fp8")
    if "grad-reduce-dtype" in r and r["grad-reduce-dtype"] not in ("fp32", "bf16", "fp16"):
        bad("grad-reduce-dtype must be fp32|bf16|fp16")
    if r.get("torchtitan-op-sac") and r.get("recompute") != "selective":
        bad("torchtitan-op-sac needs recompute = \"selective\"")
    if r.get("fsdp2-pipelining") and not (r["pipeline-model-parallel-size"] > 1 and r["zero-stage"] >= 2):
        bad("fsdp2-pipelining needs pipeline-model-parallel-size > 1 and zero-stage 2 or 3")
    if "attention-kernel" in r and r["attention-kernel"] not in ("flash", "triton"):
        bad("attention-kernel must be flash|triton")
    if r.get("attention-kernel") == "triton" and not r.get("flash-attention"):
        bad("attention-kernel = \"triton\" needs flash-attention = true")
    if "optimizer" in r and r["optimizer"] not in ("fused", "eager"):
        bad("optimizer must be fused|eager")
    sched = r.get("pipeline-schedule", "1f1b")
    if sched not in ("1f1b", "interleaved", "gpipe"):
        bad("pipeline-schedule must be 1f1b|interleaved|gpipe")
    if ("virtual-stages" in r) != (sched == "interleaved"):
        bad("virtual-stages goes with pipeline-schedule = \"interleaved\" (and only with it)")
    if not isinstance(r.get("inferred"), list) or not all(isinstance(x, str) for x in r.get("inferred", [])):
        bad("'inferred' must be a list of key names")
    else:
        for k in r["inferred"]:
            if k not in ALL_KEYS and k != "model" and not k.startswith("model."):
                bad(f"inferred names unknown key '{k}'")
    if not isinstance(r.get("note"), str):
        bad("'note' must be a string")
    if "excluded" in r and (not isinstance(r["excluded"], str) or not r["excluded"]):
        bad("'excluded' must be a non-empty string (the reason)")
    figs = [k for k in FIGURES if k in r]
    if len(figs) != 1:
        bad(f"needs exactly one measured figure of {FIGURES} (has {figs})")
    for k in figs + (["peak-tflops", "memory-gb"] if True else []):
        if k in r and (not isinstance(r[k], (int, float)) or isinstance(r[k], bool) or r[k] <= 0):
            bad(f"'{k}' must be a positive number")
    if "mfu" in r:
        if "peak-tflops" not in r:
            bad("mfu needs peak-tflops")
        if not 0 < r["mfu"] < 1:
            bad("mfu is a fraction in (0, 1)")
    if "tflops-per-device" in r or "mfu" in r:
        conv = r.get("flops", src.get("flops"))
        if conv not in FLOPS:
            bad(f"a TFLOP/s or MFU figure needs a flops convention of {sorted(FLOPS)} (has {conv})")
    elif "flops" in r and r["flops"] not in FLOPS:
        bad(f"flops '{r['flops']}' unknown")
    model = r.get("model")
    if isinstance(model, str):
        if not re.fullmatch(r"[a-z0-9.-]+", model):
            bad(f"model preset name '{model}' looks wrong")
    elif isinstance(model, dict):
        for k in MODEL_REQUIRED:
            if k not in model:
                bad(f"[run.model] missing '{k}'")
        for k, v in model.items():
            if k in MODEL_INT:
                if not isinstance(v, int) or isinstance(v, bool):
                    bad(f"[run.model] '{k}' must be an integer")
            elif k not in MODEL_OTHER:
                bad(f"[run.model] unknown key '{k}'")
        if model.get("group-query-attention", False) != ("num-query-groups" in model):
            bad("[run.model] group-query-attention = true and num-query-groups go together")
        h, a = model.get("hidden-size", 1), model.get("num-attention-heads", 1)
        if isinstance(h, int) and isinstance(a, int) and a > 0 and h % a:
            bad("[run.model] hidden-size not divisible by heads")
        if isinstance(a, int) and a % tp:
            bad(f"heads {a} not divisible by tp {tp}")
    else:
        bad("needs model = \"preset\" or a [run.model] table")


def check_file(path, keys, problems):
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        problems.append(f"{path}: {e}")
        return 0
    src = doc.get("source")
    for k in doc:
        if k not in ("source", "run"):
            problems.append(f"{path}: unknown top-level key '{k}'")
    if not isinstance(src, dict):
        problems.append(f"{path}: missing [source]")
        return 0
    for k in ("key", "citation", "stack", "date"):
        if not isinstance(src.get(k), str) or not src.get(k):
            problems.append(f"{path}: [source] missing string '{k}'")
    for k in src:
        if k not in ("key", "citation", "stack", "date", "flops"):
            problems.append(f"{path}: [source] unknown key '{k}'")
    key = src.get("key", "")
    if not re.fullmatch(r"[a-z0-9-]+", key or ""):
        problems.append(f"{path}: [source] key '{key}' must be [a-z0-9-]+")
    if key in keys:
        problems.append(f"{path}: [source] key '{key}' also in {keys[key]}")
    keys[key] = path
    if "flops" in src and src["flops"] not in FLOPS:
        problems.append(f"{path}: [source] flops '{src['flops']}' unknown")
    if not re.fullmatch(r"\d{4}-\d{2}", src.get("date", "")):
        problems.append(f"{path}: [source] date must be YYYY-MM")
    runs = doc.get("run", [])
    if not isinstance(runs, list) or not runs:
        problems.append(f"{path}: no [[run]]")
        return 0
    names = set()
    for i, r in enumerate(runs):
        where = f"{path} run {i + 1} ({r.get('name', '?')})"
        if r.get("name") in names:
            problems.append(f"{where}: duplicate name")
        names.add(r.get("name"))
        check_run(r, src, where, problems)
    return len(runs)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    files = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "*.toml")))
    problems, keys, total = [], {}, 0
    for path in files:
        n = check_file(path, keys, problems)
        total += n
        print(f"{os.path.basename(path)}: {n} runs")
    for p in problems:
        print(p)
    print(f"{len(files)} files, {total} runs, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
