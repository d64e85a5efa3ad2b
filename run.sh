#!/usr/bin/env bash
# Train a track on this machine's GPUs:  ./run.sh [medium] [--name=value ...]
#   ./run.sh                 track 1 (train_gpt.py), GPT-2 small to 3.28
#   ./run.sh medium          track 2 (train_gpt_medium.py), GPT-2 medium to 2.92  (or TRACK=medium ./run.sh)
# Uses the largest divisor of 8 that is <= the GPU count; gradient accumulation keeps the 8-GPU batch.
# Launches torchrun's launcher through PYTHON (default: python), the interpreter that checks the settings first.
# NPROC=n overrides the process count (e.g. NPROC=2 ./run.sh --device=cpu ... for a CPU smoke run); with no GPU
# and --device=cpu, one process.
# Extra arguments are passed to the script; `./run.sh [medium] --help` lists them (run.sh's usage, then the script's).
set -euo pipefail
cd "$(dirname "$0")"

track=${TRACK:-short}
if [ $# -gt 0 ] && [[ $1 != -* ]]; then track=$1; shift; fi  # the scripts take only --name=value
case $track in
    short) script=train_gpt.py ;;
    medium) script=train_gpt_medium.py ;;
    *) echo "error: unknown track '$track'; use short (default) or medium" >&2; exit 2 ;;
esac
[ -f "$script" ] || { echo "error: $script is missing from $(pwd)" >&2; exit 2; }

python=${PYTHON:-python}
command -v "$python" > /dev/null ||
    { echo "error: no python at '$python'; set PYTHON to an interpreter (default: python)" >&2; exit 2; }
check_only=false  # the script's last --check_only wins; true: the check below is the whole run
device=cuda  # the script's last --device wins: where it is not cuda, the script's check says whether it can run
for arg in "$@"; do  # help needs no GPU and no launch: run.sh's usage, then the script's (torchrun's) and settings
    if [ "$arg" = --help ] || [ "$arg" = -h ] || [[ $arg == --help=* ]]; then  # --help=1 too, as the scripts read it
        usage="$0"; [ "$track" = short ] || usage="$0 $track"
        trap '' PIPE  # a reader that closed the pipe early (| head -0) ends it quietly, as the script's help does
        echo "usage: $usage [--name=value ...]   one process per GPU (8, 4, 2 or 1; NPROC=n to choose)," \
             "through torchrun" 2> /dev/null || exit 0
        exec "$python" "$script" --help
    fi
    [ "$arg" != --device ] || device=$arg  # `--device cpu`: the script's check names the malformed argument
    [[ $arg == --check_only=* || $arg == --device=* ]] || continue
    value=${arg#--*=}  # spaces around it dropped, as the script drops them
    value=${value#"${value%%[![:space:]]*}"}; value=${value%"${value##*[![:space:]]}"}
    if [[ $arg == --device=* ]]; then device=$value; continue; fi
    case $value in  # any case, as the script reads it (no ${value,,}: macOS's bash 3.2 lacks it)
        1 | [Tt][Rr][Uu][Ee] | [Yy][Ee][Ss]) check_only=true ;;
        *) check_only=false ;;
    esac
done
if [ -n "${NPROC:-}" ]; then
    if ! [[ $NPROC =~ ^[1-9][0-9]*$ ]]; then
        echo "error: NPROC=$NPROC is not a process count; use 1, 2, 4 or 8" >&2
        exit 2
    fi
    if (( 8 % NPROC != 0 )); then
        echo "error: NPROC=$NPROC does not divide 8; use 1, 2, 4 or 8" >&2
        exit 2
    fi
    nproc=$NPROC
else
    gpus=$("$python" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null) ||
        { echo "error: '$python' cannot import torch; install it with: pip install -r requirements.txt" >&2; exit 2; }
    if [ "$gpus" -lt 1 ] && [ "$device" = cuda ]; then  # not CUDA: the script's check names its valid values
        echo "error: no CUDA GPU found; run on a GPU machine, or pass --device=cpu (and NPROC=n for n processes)" \
             "for a tiny CPU run" >&2
        exit 2
    fi
    nproc=1
    for n in 8 4 2 1; do
        if [ "$gpus" -ge "$n" ]; then nproc=$n; break; fi
    done
    [ "$gpus" -eq "$nproc" ] || [ "$gpus" -eq 0 ] ||
        echo "note: $gpus GPUs found; using $nproc (the number of processes must divide 8)"
fi
# torchrun sets this for several processes and prints a 4-line warning saying so; the same default, quietly
[ "$nproc" -eq 1 ] || export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# Check settings, data and devices first: a mistake is one line here, not a traceback per process. The check is
# rank 0 of the run (a RANK left in the shell would hide its errors; torchrun sets the ranks' own).
RANK=0 LOCAL_RANK=0 WORLD_SIZE=$nproc LOCAL_WORLD_SIZE=$nproc "$python" "$script" "$@" --check_only=true
[ "$check_only" = false ] || exit 0

# torchrun's launcher, with the same python as the check (run, not main: main's @record copies a failed rank's error
# file and logs 3 lines about it). A process that fails has printed its own error; the launcher's traceback after it
# (30-40 lines) becomes one line naming a failed rank, and run.sh exits with its status (1 for a rank killed by a
# signal). Of the ranks torchrun saw fail, it names one that failed on its own (not one stopped by a signal once
# another failed), then one whose console shows its error (every rank finds a setting's; rank 0 prints it), then the
# first; where that console is not above, the line gives the rank's error. Ctrl-C or SIGTERM: the ranks get it
# (torchrun passes SIGTERM on) and rank 0 prints the line; the launcher's traceback goes, and the status is 128 + the
# signal, as a shell gives.
exec "$python" -c '
import signal
import sys
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args, run
STOPPED = {128 + signum for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}  # the scripts exit so

def cause_first(rank_and_failure):
    rank, failure = rank_and_failure
    stopped = failure.exitcode < 0 or failure.exitcode in STOPPED
    return stopped, not failure.error_file_data.get("shown", False), failure.timestamp, rank

try:
    run(parse_args(sys.argv[1:]))
except SignalException as stopped:
    sys.exit(128 + stopped.sigval)
except ChildFailedError as failed:
    rank, failure = min(failed.failures.items(), key=cause_first)
    code = failure.exitcode
    how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
    written = failure.error_file_data  # by the script: its last line, and whether its console shows it
    why = ""
    if "shown" in written:
        why = " (its output is above)" if written["shown"] else ": " + written["message"].removeprefix("error: ")
    print(f"error: rank {rank} {how}{why}", file=sys.stderr)
    sys.exit(code if code > 0 else 1)
' --standalone --nproc_per_node="$nproc" "$script" "$@"
