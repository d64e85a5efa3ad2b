# The relu-square kernel's six variants (prepare.sh) timed alone at a micro-step's 49,152 x 3,072: main's from h;
# from a with a's store last (the stack's) or first, with sqrt.approx, with no root (the floor), with relu's zeros
# kept off sqrt.rn's slow path. Into $OUT/relu_variants.txt, and printed.
(cd perf/base/e4m3a && for variant in main last first approx nosqrt guard; do
    timeout 40 python bench.py "$variant" 2>&1 | tail -1
done) | tee "$OUT/relu_variants.txt"
