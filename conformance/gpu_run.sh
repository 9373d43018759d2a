#!/usr/bin/env bash
# The full cuda conformance matrix on a lent GPU machine, within one call of the GPU tool
# (10 minutes a command; H200, 16 cores: the run takes about 5).
#
#   conformance/gpu_run.sh [ARGS...]         a new run (ARGS go to python -m conformance)
#   conformance/gpu_run.sh RUN_ID [ARGS...]  finish RUN_ID: its JSONL (reports/runs/RUN_ID.jsonl,
#                                            or $AOQ_CARRY/RUN_ID.jsonl, with results.sqlite
#                                            beside it if carried) is copied to $OUT and the
#                                            run goes on there
#
# Writes to $OUT: RUN_ID.jsonl (commit it to reports/runs/), results.sqlite, conform.log (the
# console), gpu-memory.csv (every process's GPU memory, sampled every 5 s) and
# cpu-scaled-mm.txt (how long this host's CPU torch._scaled_mm takes for one fp8 256x4096x4096
# product on one thread: the cross-device check of fp8-tensor runs it). The run ends by
# AOQ_TIME_LIMIT seconds after this script starts (default 540): cases that could not be done
# by then are left, the exit status is 3, and the last lines say how to resume.
# Exit status: 0 all green, 1 a case is red, 2 bad usage, 3 cases left for a resume.
# Tuning (optional): AOQ_JOBS (workers, default half the cores, at most 8 per GPU),
# AOQ_FRESH_JOBS (checkers, default half of that), AOQ_CASE_TIMEOUT (s, default 240);
# AOQ_BACKEND (default cuda), AOQ_NO_INSTALL=1 (aoq is installed already: tests use both).
set -uo pipefail
start=$SECONDS
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
limit=${AOQ_TIME_LIMIT:-540}
carry=${AOQ_CARRY:-reports/runs}
py=${AOQ_PYTHON:-python3}
background=()
trap '((${#background[@]})) && kill "${background[@]}" 2>/dev/null' EXIT

if [[ -z ${AOQ_NO_INSTALL:-} ]]; then
    "$py" -m pip install -q --no-deps --no-build-isolation -e . || exit 2
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -l 5 \
        > "$OUT/gpu-memory.csv" 2>/dev/null &
    background+=($!)
fi

# in the background, one thread, at most 150 s: the suspect of the H200 runs' stalled checks
OMP_NUM_THREADS=1 timeout 150 "$py" -c '
import time, torch
a = torch.randn(256, 4096).to(torch.float8_e4m3fn)
b = torch.randn(4096, 4096).to(torch.float8_e4m3fn)
one = torch.ones(())
t = time.monotonic()
torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
print(f"torch {torch.__version__}: CPU fp8 _scaled_mm 256x4096x4096, 1 thread: "
      f"{time.monotonic() - t:.2f}s")
' > "$OUT/cpu-scaled-mm.txt" 2>&1 || echo "timed out or failed (status $?)" >> "$OUT/cpu-scaled-mm.txt" &
background+=($!)

args=(--store "$OUT/results.sqlite" --runs-dir "$OUT" --no-report
      --timeout "${AOQ_CASE_TIMEOUT:-240}")
[[ -n ${AOQ_JOBS:-} ]] && args+=(--jobs "$AOQ_JOBS")
[[ -n ${AOQ_FRESH_JOBS:-} ]] && args+=(--fresh-jobs "$AOQ_FRESH_JOBS")
if [[ $# -ge 1 && $1 != -* ]]; then
    run_id=$1
    shift
    jsonl=$carry/$run_id.jsonl
    if [[ ! -f $jsonl ]]; then
        echo "gpu_run.sh: $jsonl not found: put the JSONL of run $run_id there (or set AOQ_CARRY)" >&2
        exit 2
    fi
    cp "$jsonl" "$OUT/"
    [[ -f $carry/results.sqlite ]] && cp "$carry/results.sqlite" "$OUT/"
    args+=(--resume "$run_id")
else
    args+=(--backend "${AOQ_BACKEND:-cuda}")
fi
args+=("$@")
left=$((limit - (SECONDS - start)))
((left < 1)) && left=1
echo "gpu_run.sh: python -m conformance ${args[*]} --time-limit $left"
"$py" -m conformance "${args[@]}" --time-limit "$left" 2>&1 | tee "$OUT/conform.log"
status=${PIPESTATUS[0]}
echo "gpu_run.sh: exit status $status after $((SECONDS - start))s; $OUT holds:" $(ls "$OUT")
exit "$status"
