# Session 68, call 1: full batch A B C C B A: main (A, 09095a0) against perf/mlp-static-x-scale (B) and
# perf/gate-elementwise (C). Expected (written in perf/NOTES.md before): B -3 to -4.5 ms, C -1 to -3 ms (H100)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
unpack_proxy_data
versions=$(mktemp -d); cp train_gpt.py "$versions/original.py"
cp perf/base/m68.py "$versions/A.py"; cp perf/base/mlp.py "$versions/B.py"; cp perf/base/gate.py "$versions/C.py"
out=$OUT/ab; start=$SECONDS
for name in A1 B1 C1 C2 B2 A2; do
    v=${name:0:1}
    [ $((SECONDS - start)) -lt 520 ] || { echo "skip $name (time)"; continue; }
    timeout $((585 - SECONDS + start)) bash -c "source perf/proxy_common.sh; versions=$versions; \
        run_version train_gpt.py $v $out fullbatch_$name $versions/artifacts_$v ${FULL_BATCH[*]}"
    echo "$name done at $((SECONDS - start)) s: $(grep -o 'step_avg:[0-9.]*ms' $out/fullbatch_$name.out | tail -1)"
done
cp "$versions/original.py" train_gpt.py
proxy_summary "$out" fullbatch_A1 fullbatch_B1 fullbatch_C1 fullbatch_C2 fullbatch_B2 fullbatch_A2 | cut -c1-300
