#!/usr/bin/env bash
# Record the production suite on the device machine (one H200, 16 cores), mtia and nvidia side by
# side in one command: the mtia searches on most of the CPU cores (the simulator), the nvidia
# searches on the GPU with the cores left. Resumable across commands: every phase already recorded
# is skipped, and the mtia search stores travel in archives.
#
# Here, once (the wheels and llvm-mc the bare image lacks; see tools/carry_llvm_mc.sh):
#   .devcarry/{unicorn,lark,pyelftools}-*.whl  .devcarry/llvm.tar.xz
# Each device command (carry .devcarry), e.g.:
#   MTIA_BUDGET=30 GPU_BUDGET=24 DEADLINE=430 bash tools/device_record.sh
# then, here: copy mtia_*state.tar.gz back into .devcarry/ (the next command resumes from them) and
# unpack gpu_results.tgz in the checkout (the nvidia records travel as untracked files).
#
# Knobs (environment): MTIA_SUITE (default production; e.g. holdout, with MTIA_ONLY its problems and
# ATTN=0) / MTIA_ONLY / MTIA_BUDGET / MTIA_JOBS / MTIA_AT_ONCE (problems other than attention),
# ATTN_BUDGET / ATTN_JOBS (attention_fwd_fp16, searched apart with its own budget), GPU_ONLY /
# GPU_BUDGET / GPU_SEARCH / GPU_NAME, DEADLINE (s after setup: no new work after it), MTIA=0, ATTN=0
# or GPU=0 to leave a side out, MTIA_NAME (the mtia state archive's name, default mtia).
# Record the nvidia side alone (MTIA=0): beside an mtia record on 12 cores its evaluations took
# 18-62 s each (3-8x longer) and the deadline cut its native-dtype baselines.
set -uo pipefail
: "${OUT:?run on the device machine (\$OUT is its result folder)}"
CARRY=${CARRY:-.devcarry}
ALL=gemm_fp16_512,gemm_bf16_1024,gemm_fp16_2048,gemm_bf16_4096,linear_bias_relu_fp16,linear_bias_gelu_bf16
ALL=$ALL,bmm_fp16,embedding_bag_sum_fp16,embedding_bag_mean_fp32,jagged_sum_fp32,jagged_softmax_fp32
ALL=$ALL,jagged_to_padded_fp16,layer_norm_bf16,rms_norm_fp16,softmax_fp32,conv1d_fp16,conv2d_fp16
MTIA_SUITE=${MTIA_SUITE:-production}
MTIA_ONLY=${MTIA_ONLY:-$ALL}
MTIA_AT_ONCE=${MTIA_AT_ONCE:-4}
MTIA_BUDGET=${MTIA_BUDGET:-30}
MTIA_JOBS=${MTIA_JOBS:-10}
ATTN_BUDGET=${ATTN_BUDGET:-50}
ATTN_JOBS=${ATTN_JOBS:-2}
GPU_ONLY=${GPU_ONLY:-}
GPU_BUDGET=${GPU_BUDGET:-24}
GPU_SEARCH=${GPU_SEARCH:-60}
GPU_NAME=${GPU_NAME:-production_nvidia_$(date -u +%F)}
DEADLINE=${DEADLINE:-430}
MTIA=${MTIA:-1}
ATTN=${ATTN:-1}
MTIA_NAME=${MTIA_NAME:-mtia}
GPU=${GPU:-1}

t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p /tmp/kc && tar xJf "$CARRY/llvm.tar.xz" -C /tmp/kc || exit 3
printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/kc/llvmcarry/lib exec /tmp/kc/llvmcarry/llvm-mc "$@"\n' >/tmp/kc/llvmcarry/mc.sh
chmod +x /tmp/kc/llvmcarry/mc.sh
export KEGEN_LLVM_MC=/tmp/kc/llvmcarry/mc.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/setup.log" 2>&1 || exit 3
echo "setup $(($(date +%s) - t0)) s" | tee -a "$OUT/setup.log"

mtia_record() {  # name problems budget jobs at_once
    local name=$1
    [ -f "$CARRY/${name}_state.tar.gz" ] && cp "$CARRY/${name}_state.tar.gz" "$OUT/"
    timeout -s TERM $((DEADLINE + 90)) python3 tools/record_production.py --suite "$MTIA_SUITE" --only "$2" --budget "$3" \
        --jobs "$4" --problems-at-once "$5" --skip-done --deadline "$DEADLINE" --drain 70 \
        --no-compile-baseline --work-dir "/tmp/$name" --archive "$OUT/${name}_state.tar.gz" \
        --out "/tmp/res/$name" >"$OUT/$name.log" 2>&1
    echo "$name: rc $? after $(($(date +%s) - t0)) s" >>"$OUT/setup.log"
    cp -r /tmp/res/"$name".md /tmp/res/"$name".json /tmp/res/"$name"_kernels "$OUT/" 2>/dev/null
}
pids=()
if [ "$MTIA" = 1 ]; then
    mtia_record "$MTIA_NAME" "$MTIA_ONLY" "$MTIA_BUDGET" "$MTIA_JOBS" "$MTIA_AT_ONCE" &
    pids+=($!)
fi
if [ "$MTIA" = 1 ] && [ "$ATTN" = 1 ]; then
    mtia_record "${MTIA_NAME}_attn" attention_fwd_fp16 "$ATTN_BUDGET" "$ATTN_JOBS" 1 &
    pids+=($!)
fi
if [ "$GPU" = 1 ]; then
    timeout -s TERM $((DEADLINE + 80)) python3 tools/record_production_gpu.py ${GPU_ONLY:+--only "$GPU_ONLY"} \
        --budget "$GPU_BUDGET" --search-time "$GPU_SEARCH" --deadline "$DEADLINE" --skip-done \
        --work /tmp/kpg --name "$GPU_NAME" >"$OUT/gpu.log" 2>&1
    echo "gpu: rc $? after $(($(date +%s) - t0)) s" >>"$OUT/setup.log"
    tar czf "$OUT/gpu_results.tgz" docs/results/"$GPU_NAME"*
fi
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT/setup.log"
tail -n 5 "$OUT"/*.log
