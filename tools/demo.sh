#!/usr/bin/env bash
# The user's day on the built-in default scenario, Llama 3 70B on 64 H100 (8 DGX H100):
#  1. calibrate this host: the cpu backend's GEMMs, attention and collectives, 2 MPI ranks;
#  2. sweep every plan for the default scenario and print the best with why they win;
#  3. simulate the winner at full fidelity: result.json, a Perfetto trace, and the GUI's
#     timeline of it as a PNG (strata-gui --screenshot, offscreen);
#  4. export the winner as the files that launch it (strata-run.json, Megatron-LM flags,
#     DeepSpeed config, sbatch and mpirun scripts);
#  5. the loop on this machine with a model small enough for a CPU, on the step-1
#     calibration: simulate -> export -> mpirun -n 2 strata run -> predicted vs measured.
# Every file stays under the output directory (default build/demo); the end lists them.
set -euo pipefail
strata=${1:-build/release/cli/strata}
gui=${STRATA_GUI:-$(dirname "$(dirname "$strata")")/gui/strata-gui}
out=${STRATA_DEMO_OUT:-build/demo}
model=llama3-70b
cluster=dgx-h100-8node
mpirun=${STRATA_MPIRUN:-mpirun}
# A container runs as root; OpenMPI refuses that unless told (docs/runtime.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

rm -rf "$out"
mkdir -p "$out"
step() { printf '\n== %s\n' "$*"; }

step "1/5 calibrate this host: mpirun -n 2 strata calibrate --backend cpu --quick --model tiny"
"$mpirun" -n 2 --oversubscribe --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none \
  "$strata" calibrate --backend cpu --quick --model tiny --out "$out/calibration/cpu-profile.json" \
  | tail -n 4

step "2/5 strata sweep --model $model --cluster $cluster --top 5"
"$strata" sweep --model "$model" --cluster "$cluster" --top 5 --out "$out/sweep"

step "3/5 strata simulate --from-sweep $out/sweep/sweep.json --rank 1"
"$strata" simulate --from-sweep "$out/sweep/sweep.json" --rank 1 --out "$out/winner"
if [[ -x "$gui" ]]; then
  QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$out/winner/timeline.png" --view timeline \
    "$out/winner/result.json"
else
  echo "(no $gui in this build: the timeline PNG is skipped)"
fi

step "4/5 strata export --from-sweep $out/sweep/sweep.json --rank 1"
"$strata" export --from-sweep "$out/sweep/sweep.json" --rank 1 --out "$out/launch"
echo "-- $out/launch/megatron-args.sh --print"
bash "$out/launch/megatron-args.sh" --print | paste -sd' ' | fold -s -w 100

step "5/5 strata validate --quick --profile $out/calibration/cpu-profile.json (simulate -> export -> run -> compare)"
"$strata" validate --quick --profile "$out/calibration/cpu-profile.json" --work-dir "$out/loop"

step "files"
cat <<LIST
  $out/calibration/cpu-profile.json   this host's calibrated cpu profile
  $out/sweep/sweep.csv, sweep.json     every plan tried, ranked (strata-gui $out/sweep/sweep.json)
  $out/winner/result.json, trace.json  the winner simulated (open trace.json in ui.perfetto.dev)
  $out/winner/timeline.png             the GUI's timeline of it
  $out/launch/                         its launch files: $(cd "$out/launch" && ls | tr '\n' ' ')
  $out/loop/                           the cpu loop: each plan's prediction.json and measured.json
LIST
