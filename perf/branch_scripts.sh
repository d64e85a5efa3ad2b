#!/usr/bin/env bash
# Copy the track scripts that each named branch changes against the local branch main into perf/base/ (ignored,
# carried to the device), so that perf/ab.sh can run them as variants next to the checkout's own:
# perf/base/<branch with / as ->_<script>. A branch that changes neither says so.
# Usage (here, before a device call): bash perf/branch_scripts.sh perf/fp8-grad-in-graph recipe/bf16-embeddings
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -euo pipefail
for branch in "$@"; do  # each one checked before anything is written (a missing one left an empty script)
    git rev-parse --quiet --verify "$branch^{commit}" > /dev/null ||
        { echo "error: no branch or commit '$branch' here (git branch -a lists them)" >&2; exit 2; }
done
mkdir -p perf/base
for branch in "$@"; do
    copied=false
    for script in train_gpt.py train_gpt_medium.py; do
        # only the scripts the branch has and changes
        if git cat-file -e "$branch:$script" 2> /dev/null && ! git diff --quiet main "$branch" -- "$script"; then
            target="perf/base/${branch//\//-}_${script}"
            git show "$branch:$script" > "$target"
            echo "$target"
            copied=true
        fi
    done
    $copied || echo "note: $branch changes neither track script against main: nothing copied" >&2
done
