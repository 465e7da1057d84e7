#!/usr/bin/env bash
# Training through Slurm: a one-node Slurm (scripts/slurm/local_cluster.sh:
# munged, slurmctld, slurmd from Debian's slurm-wlm) runs a tiny 2-rank
# `tessera train` three ways, and each must log the same losses, bit for bit,
# as the same run under scripts/mpirun.sh -n 2 (the reference):
#   1. `srun -n 2 tessera train ...`: ranks from Slurm's PMIx server
#      (MpiDefault=pmix in the local slurm.conf);
#   2. `sbatch scripts/slurm/train.sbatch` (srun --mpi=pmix inside), stopped
#      after step 2 with a checkpoint;
#   3. the same job script again with TESSERA_LAUNCH=mpirun (Open MPI's mpirun
#      inside the allocation), which must resume from that checkpoint and
#      finish steps 3-4 as the reference did;
#   4. `tessera tune --launcher srun`: a 2-rank trial whose losses equal the
#      same trial file run under mpirun.
# Each run must really be one 2-rank job (its metrics say "ranks":2), not two
# single-rank jobs that happen to agree. The cluster is stopped on any exit.
# Needs root and slurm-wlm + munge (scripts/setup.sh); exits 77 (CTest: skipped)
# with the reason when either is missing.
# Usage: test_slurm.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
cluster=$src/scripts/slurm/local_cluster.sh

[ "$(id -u)" -eq 0 ] || skip "the local Slurm daemons need root"
for cmd in munged slurmctld slurmd srun sbatch sinfo; do
  command -v "$cmd" >/dev/null || skip "$cmd not installed (apt-get install slurm-wlm munge; scripts/setup.sh does)"
done

tmp=$(mktemp -d)
# A private cluster: its own state directory and ports, so a cluster a
# developer runs (or another test run on this machine) is left alone.
export TESSERA_SLURM_DIR=$tmp/slurm
# Two free ports (slurmctld, slurmd), from a random start: two runs at once
# (several checkouts on one machine) should not race for the same pair.
port=$(/usr/bin/python3 -c 'import random, socket
first = random.randrange(20000, 30000, 2)
for p in list(range(first, 30000, 2)) + list(range(20000, first, 2)):
    try:
        socks = [socket.create_server(("127.0.0.1", q)) for q in (p, p + 1)]
    except OSError:
        continue
    print(p); break')
export TESSERA_SLURM_PORT=$port
# Slurm variables from an enclosing job (CI under Slurm) would confuse ours.
unset "${!SLURM_@}"
export SLURM_CONF=$TESSERA_SLURM_DIR/slurm.conf
cleanup() {
  timeout 60 "$cluster" stop >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # a CTest timeout still stops the cluster (the EXIT trap)


# Four steps of a tiny model; the schedule decays over 4 steps whatever
# --train-iters is, so a 2-step run is the first half of the 4-step one.
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --lr-decay-iters 4
       --no-progress --peak-tflops 1 --log-interval 1)


two_ranks() {  # two_ranks METRICS_FILE: the run record says one job of 2 ranks
  grep -q '"ranks":2' "$1" && grep -q '"dp":2' "$1"
}

start=$SECONDS
if ! timeout 120 "$cluster" start; then
  echo "FAIL: the local Slurm did not start"
  exit 1
fi
echo "ok: local Slurm up in $((SECONDS - start)) s (SLURM_CONF=$SLURM_CONF)"

# Reference: the same job under mpirun.
if ! timeout 120 "$src/scripts/mpirun.sh" -n 2 "$bin" train "${small[@]}" --threads 1 --train-iters 4 \
    --metrics-file "$tmp/ref.jsonl" >"$tmp/ref.out" 2>&1; then
  sed 's/^/    /' "$tmp/ref.out"
  echo "FAIL: the reference run under scripts/mpirun.sh failed"
  exit 1
fi
losses "$tmp/ref.jsonl" >"$tmp/ref.losses"
[ "$(wc -l <"$tmp/ref.losses")" -eq 4 ] || fail "reference: want 4 logged losses, got $(wc -l <"$tmp/ref.losses")"

# 1. srun directly, as a user would type it.
if timeout 120 srun -n 2 --time=5 "$bin" train "${small[@]}" --threads 1 --train-iters 4 \
    --metrics-file "$tmp/srun.jsonl" >"$tmp/srun.out" 2>&1; then
  if ! two_ranks "$tmp/srun.jsonl"; then
    fail "srun -n 2: not one 2-rank job (run record: $(head -c 300 "$tmp/srun.jsonl"))"
  elif ! diff <(losses "$tmp/srun.jsonl") "$tmp/ref.losses" >"$tmp/diff"; then
    fail "srun -n 2: losses differ from mpirun's:"; sed 's/^/    /' "$tmp/diff"
  else
    echo "ok: srun -n 2 tessera train: 4 losses identical to mpirun's"
  fi
else
  fail "srun -n 2 tessera train exited $?:"; sed 's/^/    /' "$tmp/srun.out"
fi

# 2. The documented job script, stopped after step 2 with a checkpoint.
# Command-line options override its #SBATCH lines (2 nodes x 8 tasks x 7 cores).
sbatch_job() {  # sbatch_job NAME TRAIN_ARGS...: submit, wait, print its output on failure
  local name=$1
  shift
  if ! timeout 150 sbatch --wait --quiet --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
      --job-name="$name" --output="$tmp/$name.out" --chdir="$src" \
      "$src/scripts/slurm/train.sbatch" "${small[@]}" "$@"; then
    fail "sbatch train.sbatch ($name) failed:"
    sed 's/^/    /' "$tmp/$name.out" 2>/dev/null
    return 1
  fi
}
export TESSERA_BIN=$bin TESSERA_SAVE=$tmp/ckpt TESSERA_SAVE_INTERVAL=2
if sbatch_job first --train-iters 2 --metrics-file "$tmp/first.jsonl"; then
  if [ ! -f "$tmp/ckpt/latest" ]; then
    fail "train.sbatch wrote no checkpoint under TESSERA_SAVE"
  elif ! two_ranks "$tmp/first.jsonl"; then
    fail "train.sbatch (srun): not one 2-rank job"
  elif ! diff <(losses "$tmp/first.jsonl") <(head -n 2 "$tmp/ref.losses") >"$tmp/diff"; then
    fail "train.sbatch (srun): losses differ from mpirun's:"; sed 's/^/    /' "$tmp/diff"
  else
    echo "ok: sbatch train.sbatch (srun --mpi=pmix): steps 1-2 identical, checkpoint written"
  fi
fi

# 3. Submitted again (as a requeue would): resumes, launched by mpirun this time.
if TESSERA_LAUNCH=mpirun TESSERA_MPIRUN_FLAGS="--allow-run-as-root --mca btl self,vader --mca mpi_yield_when_idle 1" \
    sbatch_job second --train-iters 4 --metrics-file "$tmp/second.jsonl"; then
  if ! grep -q "resuming from $tmp/ckpt" "$tmp/second.out"; then
    fail "train.sbatch did not resume from its checkpoint:"; sed 's/^/    /' "$tmp/second.out"
  elif ! two_ranks "$tmp/second.jsonl"; then
    fail "train.sbatch (mpirun): not one 2-rank job"
  elif ! diff <(losses "$tmp/second.jsonl") <(tail -n 2 "$tmp/ref.losses") >"$tmp/diff"; then
    fail "train.sbatch (mpirun), resumed: losses differ from mpirun's steps 3-4:"; sed 's/^/    /' "$tmp/diff"
  else
    echo "ok: sbatch train.sbatch (mpirun in the allocation): resumed at step 3, steps 3-4 identical"
  fi
fi

# 4. A 2-rank `tessera tune` trial through Slurm (issue 16, item 6): the
# tuner launches its trial with srun, and the trial's losses equal the same
# trial file run under mpirun.
cat >"$tmp/tune.toml" <<'EOF'
num-layers = 1
hidden-size = 32
num-attention-heads = 2
seq-length = 16
micro-batch-size = 2
global-batch-size = 4
lr-decay-iters = 4
threads = 1
peak-tflops = 1
EOF
if (cd "$tmp" && timeout 180 "$bin" tune --config tune.toml --launcher "srun -n 2 --time=5" \
      --include "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1" \
      --budget-trials 1 --steps 4 --warmup 1 --work-dir tune-runs >tune.out 2>&1); then
  trial=$tmp/tune-runs/trial_001
  if ! grep -q '"status":"ok"' "$tmp/tune-runs/tune.jsonl"; then
    fail "tune through srun: the trial did not run:"; sed 's/^/    /' "$tmp/tune.out"
  elif ! two_ranks "$trial.jsonl"; then
    fail "tune through srun: the trial was not one 2-rank job"
  elif ! timeout 120 "$src/scripts/mpirun.sh" -n 2 "$bin" train --config "$trial.toml" \
      --train-iters 4 --eval-interval 0 --no-progress --metrics-file "$tmp/tune_ref.jsonl" \
      >"$tmp/tune_ref.out" 2>&1; then
    fail "the tune trial's file under mpirun failed:"; sed 's/^/    /' "$tmp/tune_ref.out"
  elif ! diff <(losses "$trial.jsonl") <(losses "$tmp/tune_ref.jsonl") >"$tmp/diff"; then
    fail "tune through srun: the trial's losses differ from mpirun's:"; sed 's/^/    /' "$tmp/diff"
  else
    echo "ok: tessera tune --launcher srun: a 2-rank trial, losses identical to mpirun's"
  fi
else
  fail "tessera tune --launcher srun failed:"; sed 's/^/    /' "$tmp/tune.out"
fi

echo "test_slurm: $((SECONDS - start)) s in all"
finish "check(s) failed" "all Slurm checks passed"
