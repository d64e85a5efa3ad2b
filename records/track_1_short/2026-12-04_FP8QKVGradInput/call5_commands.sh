# Session 45, call 5 (a fresh nvidia-h200): the GPU checks of branch perf/plain-rows-back (the backward kernel's
# (token, head) row blocks back without the rowwise e4m3 gradient).
mkdir -p $OUT/r
timeout 110 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1
