#!/bin/bash
# Reproduce claims that need the paper presets on a single-GPU machine, many small runs at once,
# and pack what should come back (for a machine whose disk is not kept).
#
#   scripts/gpu_reproduce.sh OUT_DIR TRAIN_SECONDS TARGET...
#   e.g. scripts/gpu_reproduce.sh /tmp/out 540 tracerelay-most-freq
#
# - Starts CUDA MPS when it can (many small runs share one GPU far better under it) and checks
#   that CUDA still works through it; without MPS it goes on with time slicing.
# - Runs `tinyscope reproduce TARGET... --preset paper --include-gpu --jobs $JOBS --threads 1
#   --no-record` into reproduce/gpu (JOBS: the host's cores, at most 18 by default), interrupted
#   after TRAIN_SECONDS; an interrupted run resumes with the same command.
# - Packs, for every run, config.json, metrics.jsonl, results.json, sweep_job.json, error.txt and
#   the selected checkpoint (unfinished runs also their resume checkpoint) into OUT_DIR/runs.tar.part_*
#   (15 MiB pieces), with the log in OUT_DIR/log.txt. Back home: `cat runs.tar.part_* | tar x -C
#   reproduce/gpu`, then `tinyscope reproduce TARGET... --preset paper --include-gpu --collect-only
#   --zoo --out reproduce/gpu` records what every seed of a claim finished.
# Needs torch, numpy, safetensors, tqdm, matplotlib, scikit-learn and scipy in python3; tinyscope
# itself is used from src/ without installing it.
set -u
OUT=${1:?OUT_DIR}; TRAIN_S=${2:?TRAIN_SECONDS}; shift 2
[ $# -ge 1 ] || { echo "name at least one study, experiment or claim id" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec > >(tee -a "$OUT/log.txt") 2>&1
DIR=reproduce/gpu
CORES=$(nproc); JOBS=${JOBS:-$(( CORES < 18 ? CORES : 18 ))}
date; nvidia-smi -L || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p /tmp/mps /tmp/mpslog
MPS=0
if nvidia-cuda-mps-control -d 2>/dev/null; then
  sleep 1
  if python3 -c "import torch; torch.zeros(1, device='cuda').sum().item()"; then MPS=1
  else echo quit | nvidia-cuda-mps-control; sleep 1; fi
fi
[ "$MPS" = 1 ] && echo "MPS on" || { echo "MPS off"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }

cat > /tmp/tinyscope_main.py <<'PY'
import sys
from tinyscope.cli import main
if __name__ == "__main__":  # the runs are spawned: they import this file again
    sys.exit(main(sys.argv[1:]))
PY
( while sleep 60; do
    echo "== $(date +%T) finished: $(ls $DIR/runs/*/*/s*/results.json 2>/dev/null | wc -l)"
    for m in $DIR/runs/*/*/s*/metrics.jsonl; do [ -f "$m" ] && echo "$m $(tail -n 1 "$m" | cut -c1-120)"; done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
  done ) &
MONITOR=$!
timeout -s INT "$TRAIN_S" python3 /tmp/tinyscope_main.py reproduce "$@" --preset paper --include-gpu \
  --jobs "$JOBS" --threads 1 --no-progress --no-record --out "$DIR"
echo "reproduce exit status $?"
sleep 5; kill $MONITOR 2>/dev/null

python3 - "$DIR" <<'PY'
import pathlib, sys, tarfile
out = pathlib.Path(sys.argv[1])
with tarfile.open("/tmp/gpu_runs.tar", "w") as tar:
    for run in sorted(out.glob("runs/*/*/s*")):
        done = (run / "results.json").exists()
        names = ["config.json", "metrics.jsonl", "results.json", "sweep_job.json", "error.txt",
                 "checkpoints/best.safetensors"] + ([] if done else ["checkpoints/resume.safetensors"])
        for name in names:
            if (run / name).exists():
                tar.add(run / name, arcname=str((run / name).relative_to(out)))
        print(run, "finished" if done else "unfinished")
PY
split -b 15m /tmp/gpu_runs.tar "$OUT/runs.tar.part_"
ls -la "$OUT"; date
