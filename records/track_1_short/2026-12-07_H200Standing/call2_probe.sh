# Session 82, a probe for an H200: on an H200 main's full batch twice (s82_call1t.sh); on any other card its name.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) exec bash perf/base/s82_call1t.sh;; esac
echo "not an H200: nothing run"
