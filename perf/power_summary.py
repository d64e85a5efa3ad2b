"""One line from perf/power.sh's nvidia-smi samples: of the busy samples (GPU utilisation >= 90%), the median and the
10th-90th percentiles of power draw and SM clock, and how many had the software power cap or a slowdown active.

python perf/power_summary.py OUT/NAME_power.csv NAME  ->  that line, NAME (the run's name in perf/power.sh) first.
--help prints this.
"""
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import printed_help  # noqa: E402

BUSY_UTILISATION = 90  # percent


def percentiles(values: list[float], *points: float) -> list[float]:
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in points]


def summary(rows: list[list[str]], name: str) -> str:
    """rows: nvidia-smi's CSV (timestamp, utilisation, power, limit, SM clock, memory clock, temperature, then the
    three slowdown flags as 'Active' / 'Not Active')."""
    busy = []
    for row in rows:
        fields = [field.strip() for field in row]
        try:
            if len(fields) == 10 and float(fields[1]) >= BUSY_UTILISATION:
                busy.append((float(fields[2]), float(fields[4]), float(fields[6]), fields[7:]))
        except ValueError:  # '[N/A]' or a line cut short when the logger was stopped
            continue
    if not busy:
        return f"{name}: no busy samples (utilisation >= {BUSY_UTILISATION}%) among {len(rows)}"
    power, clock, temperature, flags = zip(*busy)
    limit = next(row[3].strip() for row in rows if len(row) == 10)

    def share(flag: int) -> str:
        return f"{100 * sum(f[flag] == 'Active' for f in flags) / len(busy):.0f}%"

    p10, p50, p90 = percentiles(power, 0.1, 0.5, 0.9)
    c10, c50, c90 = percentiles(clock, 0.1, 0.5, 0.9)
    return (f"{name}: {len(busy)} busy samples of {len(rows)}; power {p50:.0f} W ({p10:.0f}-{p90:.0f}) of {limit} W; "
            f"SM clock {c50:.0f} MHz ({c10:.0f}-{c90:.0f}); power cap active in {share(0)}, thermal slowdown "
            f"{share(1)}, hardware slowdown {share(2)}; max temperature {max(temperature):.0f} C")


def main(argv: list[str]) -> int:
    if printed_help(argv, __doc__):
        return 0
    if options := [arg for arg in argv if arg.startswith("-")]:
        print(f"error: unknown argument {options[0]!r}: it takes a CSV and a name, no options (see --help)",
              file=sys.stderr)
        return 2
    if len(argv) != 2:
        print(f"error: {len(argv)} arguments; give the CSV perf/power.sh logged and the run's name, e.g. "
              "OUT/NAME_power.csv NAME (see --help)", file=sys.stderr)
        return 2
    if not Path(argv[0]).is_file():
        print(f"error: {argv[0]}: no such file; give the CSV perf/power.sh logged, OUT/NAME_power.csv (see --help)",
              file=sys.stderr)
        return 2
    with open(argv[0], newline="") as file:
        print(summary(list(csv.reader(file)), argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
