#!/usr/bin/env bash
# Metrics (issue 16, item 3). A 6-step run saving at step 3 and 6 writes a
# metrics file whose every line (header included) has a wall-clock time; its
# log lines, printed to a file (not a terminal), are interval means with an
# ETA. A run resuming from step 3 with the same --metrics-file keeps lines
# 1-3 byte for byte, drops the 4-6 the first run wrote, and appends its own:
# each step once, one header, the resumed losses equal to the first run's.
# A metrics file that is not JSONL is refused (one line, exit 2) and left as
# it was.
# Usage: test_metrics_resume.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
scratch_dir
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --no-progress --threads 1
       --log-interval 2 --save-interval 3 --save "$tmp/ck" --metrics-file "$tmp/m.jsonl"
       --cache-dir "$tmp/cache")
"$bin" train "${small[@]}" >"$tmp/log1" 2>&1 || { cat "$tmp/log1"; exit 1; }
cp "$tmp/m.jsonl" "$tmp/first.jsonl"
python3 - "$tmp/first.jsonl" "$tmp/log1" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert "run" in lines[0], lines[0]
assert [l.get("step") for l in lines[1:]] == [1, 2, 3, 4, 5, 6], lines
for l in lines:
    t = l["run"]["wall_time"] if "run" in l else l["wall_time"]
    assert 1.7e9 < t < 4e9, f"wall_time {t}"
times = [l["wall_time"] for l in lines[1:]]
assert times == sorted(times), times
loss = {l["step"]: l["loss"] for l in lines[1:]}
log = open(sys.argv[2]).read()
for step, first in ((4, 3), (6, 5)):
    m = re.search(rf"^step {step}/6 \| loss ([0-9.]+) .*\| mean of 2 steps \| ETA \d+s$", log, re.M)
    assert m, f"no interval line for step {step} in:\n{log}"
    want = (loss[first] + loss[step]) / 2
    assert abs(float(m.group(1)) - want) < 6e-5, (m.group(1), want)
print("ok: every line has wall_time; log lines are 2-step means with an ETA (output not a terminal)")
PY

"$bin" train "${small[@]}" --load "$tmp/ck/step_000003" --overwrite-save >"$tmp/log2" 2>&1 ||
  { cat "$tmp/log2"; exit 1; }
python3 - "$tmp/first.jsonl" "$tmp/m.jsonl" <<'PY'
import json, sys
first = open(sys.argv[1]).read().splitlines()
now = open(sys.argv[2]).read().splitlines()
assert now[:4] == first[:4], "the header and steps 1-3 must stay byte for byte"
steps = [json.loads(l).get("step") for l in now]
assert steps == [None, 1, 2, 3, 4, 5, 6], steps
a = {json.loads(l)["step"]: json.loads(l)["loss"] for l in first[1:]}
b = {json.loads(l)["step"]: json.loads(l)["loss"] for l in now[1:]}
assert a == b, (a, b)
assert json.loads(now[4])["wall_time"] > json.loads(first[6])["wall_time"], "steps 4-6 are the new run's"
print("ok: resumed at step 3: steps 4-6 replaced, each step once, losses equal")
PY

echo 'step 7 | loss 3.2' >>"$tmp/m.jsonl"
cp "$tmp/m.jsonl" "$tmp/bad.jsonl"
set +e
out=$("$bin" train "${small[@]}" --load "$tmp/ck/step_000003" --overwrite-save 2>&1)
status=$?
set -e
if [ "$status" -ne 2 ] || [ "$(grep -c error <<<"$out")" -ne 1 ] ||
   ! grep -q -- "--metrics-file $tmp/m.jsonl: line 8 is not JSON" <<<"$out"; then
  echo "FAIL: a metrics file that is not JSONL gave exit $status:"
  echo "$out"
  exit 1
fi
cmp -s "$tmp/m.jsonl" "$tmp/bad.jsonl" || { echo "FAIL: the refused metrics file changed"; exit 1; }
ls "$tmp/ck" | grep -q step_000006 || { echo "FAIL: the refusal must come before --overwrite-save deletes"; exit 1; }
echo "ok: $(grep error <<<"$out")"
