"""Which compiled graphs own a cold start's kernels. Reads the inductor cache folder of a run that started from an
empty one (TORCHINDUCTOR_CACHE_DIR): each compiled graph's module there carries AOTAutograd's id for it (its
order, and forward, backward or inference) and defines the kernels it launches with their sources. A cold start
compiles each distinct source once, so a graph costs compile time for the sources that no graph before it had.

python perf/compile_census.py CACHE_DIR [TRITON_CACHE_DIR]  ->  one line per graph: its kernels by kind (Triton
pointwise, reduction, persistent reduction, template; C++ on the CPU), then how many of them are new, and the
totals. Session 11's cold start compiled 366 Triton kernels for track 1 and waited ~100 s on them: this says which
graphs they are. With the run's TRITON_CACHE_DIR (filled from empty too), also the binaries Triton built: one per
kernel and launch configuration, so a census kernel with several is one that inductor timed in several
configurations, and a name in no graph module is a kernel no loaded graph launches (or one of the script's own);
then the compile's timeline from the files' times: when each graph module was written and when its binaries were
done, which tells a wait on many kernels from a wait on a few slow ones; and the slowest builds, stage by stage.
--help prints this.
"""
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import printed_help  # noqa: E402

AOT_ID = re.compile(r"^# AOT ID: \['(\w+)'\]", re.MULTILINE)
# a kernel's definition in a graph module: its name, then its source as the call's one raw triple-quoted string
KERNEL = re.compile(r"^(\w+) = async_compile\.\w+\(.*?'''(.*?)'''", re.MULTILINE | re.DOTALL)
KINDS = ("triton_poi", "triton_red", "triton_per", "triton_tem", "cpp")
TRITON_FILE_NAME_LIMIT = 150  # Triton names a cache entry's files after the kernel, cut at 150 characters


def graph_module_files(cache_dir: Path) -> list[tuple[Path, str, str]]:
    """(path, AOTAutograd id, text) of every graph module under cache_dir; kernel sources and other files have no
    id. Processes sharing the folder (torchrun's ranks) number their graphs alike: a repeated id gets a quote."""
    files, ids = [], set()
    for path in sorted(cache_dir.rglob("*.py")):
        text = path.read_text(errors="replace")
        match = AOT_ID.search(text)
        if match:
            graph_id = match.group(1)
            while graph_id in ids:
                graph_id += "'"
            ids.add(graph_id)
            files.append((path, graph_id, text))
    return files


def graph_modules(cache_dir: Path) -> dict[str, dict[str, str]]:
    """AOTAutograd id -> {kernel name: source} for every graph module under cache_dir, in compile order (the id's
    leading number; forward before backward)."""
    graphs = {graph_id: dict(KERNEL.findall(text)) for _, graph_id, text in graph_module_files(cache_dir)}

    def compile_order(graph_id: str) -> tuple[int, int, str]:
        number, _, role = graph_id.partition("_")
        role_order = {"forward": 0, "inference": 0, "backward": 1}.get(role.rstrip("'"), 2)
        return int(number) if number.isdigit() else 1 << 30, role_order, graph_id

    return dict(sorted(graphs.items(), key=lambda item: compile_order(item[0])))


def kind(name: str) -> str:
    return next((k for k in KINDS if name.startswith(k)), "other")


def census(graphs: dict[str, dict[str, str]]) -> list[dict]:
    """Per graph: its id, its kernels by kind, and how many sources no earlier graph (nor itself before) had."""
    seen, rows = set(), []
    for graph_id, kernels in graphs.items():
        counts = {k: 0 for k in (*KINDS, "other")}
        new = 0
        for name, source in kernels.items():
            counts[kind(name)] += 1
            new += source not in seen
            seen.add(source)
        rows.append(dict(graph=graph_id, kernels=len(kernels), new=new, **counts))
    return rows


def binary_files(triton_dir: Path) -> list[Path]:
    """Each binary Triton built: a .cubin, or a .hsaco on AMD, in each cache entry."""
    return [path for pattern in ("*.cubin", "*.hsaco") for path in triton_dir.rglob(pattern)]


def triton_binaries(triton_dir: Path) -> Counter:
    """Kernel name -> how many binaries Triton built for it."""
    return Counter(path.stem for path in binary_files(triton_dir))


def binaries_report(binaries: Counter, graphs: dict[str, dict[str, str]], listed: int = 20) -> list[str]:
    """The binaries of the graphs' kernels against those of names in no graph module, most binaries first."""
    in_graphs = {name[:TRITON_FILE_NAME_LIMIT] for kernels in graphs.values() for name in kernels}
    known = {name: n for name, n in binaries.items() if name in in_graphs}
    unknown = {name: n for name, n in binaries.items() if name not in in_graphs}
    several = sum(1 for n in known.values() if n > 1)
    lines = [f"{sum(binaries.values())} Triton binaries of {len(binaries)} kernel names",
             f"  graph modules' kernels: {sum(known.values())} binaries of {len(known)} names ({several} with more "
             f"than one launch configuration)",
             f"  names in no graph module: {sum(unknown.values())} binaries of {len(unknown)} names"]
    for name, n in sorted(unknown.items(), key=lambda item: (-item[1], item[0]))[:listed]:
        lines.append(f"    {n:>4}  {name}")
    return lines


def timeline(cache_dir: Path, triton_dir: Path) -> list[tuple[float, str, str]]:
    """(when its file was written, "graph" or "binary", name) of each graph module and each Triton binary, in time
    order. Inductor writes a graph's module once its kernels are submitted to the compile workers, and waits for
    them before lowering the next graph; a binary's file is written when its compile ends."""
    events = [(path.stat().st_mtime, "graph", graph_id) for path, graph_id, _ in graph_module_files(cache_dir)]
    events += [(path.stat().st_mtime, "binary", path.stem) for path in binary_files(triton_dir)]
    return sorted(events, key=lambda event: (event[0], event[1] != "graph"))  # a graph before its binaries


def timeline_report(events: list[tuple[float, str, str]], gap: float = 2.0, named: int = 6) -> list[str]:
    """The cold start's compile as it ran, in seconds after the first file: each graph module, and between them the
    binaries in waves (each finished less than `gap` seconds after the one before), with the last few of each wave
    named. A wave whose end trails far behind most of its binaries waits on a few slow kernels, not on the
    number of kernels."""
    if not events:
        return []
    start, lines, wave = events[0][0], ["compile timeline (seconds after the first file written):"], []

    def end_wave():
        if wave:
            last = ", ".join(f"{name[:70]} {at - start:.1f}" for at, name in wave[-named:])
            middle = wave[len(wave) // 2][0] - start
            lines.append(f"  {wave[0][0] - start:7.1f} to {wave[-1][0] - start:.1f}: {len(wave)} binaries, half by "
                         f"{middle:.1f}; last: {last}")
            wave.clear()

    for at, what, name in events:
        if what == "graph" or (wave and at - wave[-1][0] > gap):
            end_wave()
        if what == "graph":
            lines.append(f"  {at - start:7.1f}: graph module {name} written")
        else:
            wave.append((at, name))
    end_wave()
    return lines


STAGES = (".ttir", ".ttgir", ".llir", ".ptx", ".cubin")  # Triton writes each stage's file to its cache as it ends


def build_seconds(triton_dir: Path) -> list[tuple[float, str, list[float]]]:
    """(seconds from the .ttir to the .cubin, kernel name, seconds of each later stage) of every binary, slowest
    first: the stages are Triton's GPU passes (.ttgir), the lowering to LLVM (.llir), LLVM's PTX (.ptx) and ptxas
    (.cubin). Entries without all five files (another backend, a failed build) are left out."""
    builds = []
    for cubin in triton_dir.rglob("*.cubin"):
        files = [cubin.with_suffix(suffix) for suffix in STAGES]
        if all(path.exists() for path in files):
            times = [path.stat().st_mtime for path in files]
            builds.append((times[-1] - times[0], cubin.stem, [b - a for a, b in zip(times, times[1:])]))
    return sorted(builds, key=lambda build: -build[0])


def slowest_builds_report(builds: list[tuple[float, str, list[float]]], listed: int = 10) -> list[str]:
    if not builds:
        return []
    total = sum(seconds for seconds, _, _ in builds)
    lines = [f"Triton builds: {total:.1f} s in all, {len(builds)} binaries; the slowest (seconds: all, then "
             f"{', '.join(suffix[1:] for suffix in STAGES[1:])}):"]
    for seconds, name, stages in builds[:listed]:
        lines.append(f"  {seconds:6.1f}  {' '.join(f'{stage:5.1f}' for stage in stages)}  {name}")
    return lines


def argument_error(argv: list[str]) -> int | None:
    """2 after one line naming what is wrong with the command line (an option, the count of folders, a folder that is
    not one); None when it names one or two folders."""
    if options := [arg for arg in argv if arg.startswith("-")]:
        print(f"error: unknown argument {options[0]!r}: it takes one or two folders, no options (see --help)",
              file=sys.stderr)
        return 2
    if len(argv) not in (1, 2):
        print(f"error: {len(argv)} arguments; give CACHE_DIR [TRITON_CACHE_DIR], the run's TORCHINDUCTOR_CACHE_DIR "
              "and TRITON_CACHE_DIR, each filled from empty (see --help)", file=sys.stderr)
        return 2
    if missing := [folder for folder in argv if not Path(folder).is_dir()]:
        print(f"error: {missing[0]}: no such folder; give the run's cache folders (see --help)", file=sys.stderr)
        return 2
    return None


def main(argv: list[str]) -> int:
    if printed_help(argv, __doc__):
        return 0
    if (answer := argument_error(argv)) is not None:
        return answer
    graphs = graph_modules(Path(argv[0]))
    rows = census(graphs)
    if not rows:
        print(f"error: no compiled graph modules under {argv[0]}; was TORCHINDUCTOR_CACHE_DIR set to it, "
              "and empty, when the run started?", file=sys.stderr)
        return 1
    columns = ["graph", "kernels", "new", *KINDS, "other"]
    print("  ".join(f"{c:>12}" for c in columns))
    for row in rows:
        print("  ".join(f"{row[c]:>12}" for c in columns))
    print(f"{len(rows)} graphs, {sum(r['kernels'] for r in rows)} kernels, {sum(r['new'] for r in rows)} distinct "
          "sources (compiled once each)")
    if len(argv) == 2:
        print("\n".join(binaries_report(triton_binaries(Path(argv[1])), graphs)))
        print("\n".join(timeline_report(timeline(Path(argv[0]), Path(argv[1])))))
        print("\n".join(slowest_builds_report(build_seconds(Path(argv[1])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
