#!/usr/bin/env bash
# One command: a Hugging Face chat model learns BRAWLPIT through /move on one CUDA GPU
# (docs/move_training.md, "A Hugging Face model"): the supervised start from the scripted
# player's fights, then on-line RL (clipped policy gradient + KL to the frozen base, LoRA).
#
#   examples/move_clients/train_hf_gpu.sh [MODEL] [OUT] [extra policy-train flags...]
#
# MODEL: a hub id or a local folder (default Qwen/Qwen3-0.6B); `tiny` builds the tests'
# tiny model first (no download: the same run the suite smoke-tests) with the settings of
# the 15-minute CPU benchmark (docs/move_training.md, "The tiny model"): DEVICE=cpu runs it
# on the CPU. Needs the llm extra: pip install -e '.[llm,move]' and the native build
# (make -C native).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-Qwen/Qwen3-0.6B}
OUT=${2:-runs/move_hf}
shift $(( $# > 2 ? 2 : $# ))
PY=${PYTHON:-python}
if [ "$MODEL" = tiny ]; then
  MODEL="$OUT/tiny-lm"
  "$PY" -m brawlkit.policy_server.tiny_lm "$MODEL"
  # every weight trains (no LoRA); small minibatches at a high rate: the 0.1 M-parameter
  # model is limited by optimizer steps, not data; 8 workers share each forward (batched)
  LR=${LR:-1e-3}; CLONE_LR=${CLONE_LR:-1e-3}; LORA=${LORA:-0}; CLONE_MB=${CLONE_MB:-32}; MICRO=${MICRO:-32}
  WORKERS=${WORKERS:-8}; CLONE_FIGHTS=${CLONE_FIGHTS:-32}; DAGGER_FIGHTS=${DAGGER_FIGHTS:-16}
  CLONE_EPOCHS=${CLONE_EPOCHS:-2}; EVAL_FIGHTS=${EVAL_FIGHTS:-4}; MINUTES=${MINUTES:-60}
  # the budget in CPU time (trainer, endpoint, workers, servers): the same run on a busy
  # machine; it uses about one core, so 10.5 CPU-minutes plus the final evaluation end
  # within 15 minutes on an idle 2-core machine
  BUDGET=(--cpu-minutes "${CPU_MINUTES:-10.5}")
fi
exec "$PY" -m brawlkit policy train --hf "$MODEL" --device "${DEVICE:-cuda}" --out "$OUT" \
  --lora-rank "${LORA:-16}" --lr "${LR:-1e-5}" --kl-coef 0.04 --clip 0.2 --epochs 1 \
  --minibatch 256 --micro-batch "${MICRO:-16}" --max-new-tokens 8 --temperature 1.0 \
  --clone-fights "${CLONE_FIGHTS:-24}" --dagger-fights "${DAGGER_FIGHTS:-${CLONE_FIGHTS:-24}}" --clone-rounds 1 \
  --clone-epochs "${CLONE_EPOCHS:-2}" --clone-lr "${CLONE_LR:-2e-4}" --clone-minibatch "${CLONE_MB:-128}" \
  --workers "${WORKERS:-2}" --fights-per-batch "${FIGHTS:-8}" --minutes "${MINUTES:-60}" \
  --reward half_life_frames=300,damage_weight=1 --eval-every-s 600 --eval-fights "${EVAL_FIGHTS:-8}" \
  --final-eval-fights 50 --export ${BUDGET[@]+"${BUDGET[@]}"} "$@"
