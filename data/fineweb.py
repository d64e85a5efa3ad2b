"""Tokenize text into speedrun shards (GPT-2 tokens via tiktoken).

    # FineWeb from the Hugging Face Hub (needs `pip install datasets`), streamed:
    python data/fineweb.py --hf HuggingFaceFW/fineweb --hf_name sample-10BT --out data/fineweb10B
    # your own corpus: .jsonl files (one {"text": ...} per line), .txt files (one
    # document per file), or folders of them (read recursively, in sorted path order):
    python data/fineweb.py my_corpus/ --name mycorpus --shard_size 20000000

Every document becomes [50256 (EOT)] + its GPT-2 tokens (encode_ordinary), in input
order. Each shard is filled to exactly --shard_size tokens, so a document MAY be
split across two shards; only the last shard may be shorter. (The track loaders
start every training sequence at an EOT inside one shard, so the piece of a split
document before a shard's first EOT is simply not trained on.) The first shard is
the val shard (<name>_val_000000.bin), the rest are train shards numbered from 1
(<name>_train_000001.bin, ...). The same input gives the same bytes, whatever the
number of workers.
"""

import argparse
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from pathlib import Path

import numpy as np
from tqdm import tqdm

import shards
from cli import STOP_SIGNALS, counted, display_dir, finish, removed_if_left_empty, stop_signals_held, user_path

DATA_DIR = Path(__file__).resolve().parent
INPUT_SUFFIXES = (".jsonl", ".txt")
BYTE_ORDER_MARK = "\ufeff"  # some editors start UTF-8 files with it; it is not text
BATCHES_PER_WORKER = 64  # documents handed to the workers at once = workers * chunksize * this
MAX_SHARD_TOKENS = 2**31 - 1  # the header's token count is an int32
TRACK_VAL_TOKENS = 10_485_760 + 1  # both tracks' default --val_tokens, and the target of the last input token
CGROUP = Path("/sys/fs/cgroup")  # a container's CPU quota: cgroup v2's cpu.max, or v1's cpu/cpu.cfs_*_us

_encoder = None  # the tiktoken GPT-2 encoding of this process, set by load_encoder


class InputError(Exception):
    """A problem with the input or the output folder, explained in one line."""


def load_encoder():
    """Load tiktoken's GPT-2 encoding into this process."""
    global _encoder
    import tiktoken
    _encoder = tiktoken.get_encoding("gpt2")


def start_worker():
    """Each tokenizer process's initializer: Ctrl-C and SIGTERM reach the whole process group, and only the main
    process acts on them: it cancels the queued work, and the workers end once their current documents are done. A
    worker that a signal ended died with a traceback, or mid-message, which hung the pool's shutdown. Then the
    encoder."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    load_encoder()


def encode_document(text: str) -> np.ndarray:
    """EOT followed by the document's GPT-2 tokens, as uint16."""
    tokens = [shards.EOT]
    tokens.extend(_encoder.encode_ordinary(text))
    return np.array(tokens, dtype=np.uint16)


def is_input_file(path: Path) -> bool:
    return path.suffix.lower() in INPUT_SUFFIXES  # notes.TXT too


def list_input_files(paths) -> list:
    """Expand files and folders into the list of .jsonl/.txt files, folders in sorted order. A file named twice
    (also through a folder) is an error: its documents would be in the shards twice, in val and train alike."""
    files, named_by = [], {}
    for path in map(Path, paths):
        try:
            is_folder = path.is_dir()
        except OSError as error:  # a folder on its way this user cannot enter (Python 3.11's is_dir raises)
            raise InputError(f"{path}: cannot reach it ({error.strerror}); check its folders' permissions") from None
        if is_folder:
            found = sorted(p for p in files_below(path) if p.is_file() and is_input_file(p))
        elif path.is_file():
            if not is_input_file(path):
                raise InputError(f"{path}: unsupported input type; give .jsonl or .txt files "
                                 f"or folders of them")
            found = [path]
        else:
            raise InputError(f"{path}: no such file or folder; check the path")
        for file in found:
            if (real := file.resolve()) in named_by:
                raise InputError(f"{file} is named twice, by {named_by[real]} and by {path}; give each input once")
            named_by[real] = path
            files.append(file)
    if not files:
        raise InputError(f"no .jsonl or .txt files in {' '.join(map(str, paths))}; check the path, or save the text "
                         "as .jsonl or .txt files")
    return files


def files_below(folder: Path) -> list:
    """Every file below folder (symbolic links to folders not followed); a folder below it that cannot be read ends
    in one line naming it, where Path.rglob would leave its files out without a word."""
    def unreadable(error: OSError):
        raise InputError(f"{error.filename}: cannot read the folder ({error.strerror or error}); check its "
                         "permissions, or name the inputs one by one")
    return [Path(root, name) for root, _, names in os.walk(folder, onerror=unreadable) for name in names]


def decode_utf8(raw: bytes, where: str, offset: int) -> str:
    """raw as UTF-8 text; else one line naming where (file or file:line) and the bad byte's offset in the file."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 text ({e.reason} at byte {offset + e.start} of the file); "
                         f"convert it to UTF-8") from None


def iter_local_documents(files, text_field: str):
    """Yield the documents of .jsonl files (one per line) and .txt files (one per file); a file that cannot be read
    ends in one line naming it."""
    for file in files:
        try:
            yield from file_documents(file, text_field)
        except OSError as e:
            raise InputError(f"{file}: cannot read it ({e.strerror or e}); check the file and its "
                             f"permissions") from None


def file_documents(file: Path, text_field: str):
    """The documents of one .jsonl file (one per line) or .txt file (the whole file)."""
    if file.suffix.lower() == ".txt":
        yield decode_utf8(file.read_bytes(), str(file), 0).removeprefix(BYTE_ORDER_MARK)
        return
    with open(file, "rb") as lines:
        offset = 0
        for line_number, raw in enumerate(lines, 1):
            line = decode_utf8(raw, f"{file}:{line_number}", offset)
            if line_number == 1:
                line = line.removeprefix(BYTE_ORDER_MARK)
            offset += len(raw)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{file}:{line_number}: invalid JSON ({e.msg}); "
                                 f"fix or remove that line") from None
            text = record.get(text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise InputError(f"{file}:{line_number}: no string field "
                                 f"\"{text_field}\"; pass --text_field")
            yield text


def open_hf_documents(dataset: str, config, split: str, text_field: str):
    """Open a Hugging Face dataset for streaming (no full download); iterate its texts."""
    try:
        import datasets
    except ImportError:
        raise InputError("--hf needs the datasets library: pip install datasets") from None
    description = f"{dataset} (config {config}, split {split})"
    try:
        stream = datasets.load_dataset(dataset, name=config, split=split, streaming=True)
    except Exception as e:  # network, missing dataset/config/split: one explained line
        raise InputError(hf_failure(description, e)) from None
    return iter_hf_texts(stream, description, text_field)


def iter_hf_texts(stream, description: str, text_field: str):
    try:
        for row_number, row in enumerate(stream, 1):
            if not isinstance(text := row[text_field], str):
                raise InputError(f"{description}, row {row_number}: field \"{text_field}\" holds "
                                 f"{type(text).__name__}, not text; pass --text_field")
            yield text
    except KeyError:
        raise InputError(f"{description} has no field \"{text_field}\"; pass --text_field") from None
    except InputError:
        raise
    except Exception as e:  # the stream can fail midway (network)
        raise InputError(hf_failure(description, e)) from None


def hf_failure(description: str, exc: Exception) -> str:
    detail = (str(exc).strip().splitlines() or [""])[0]
    return (f"streaming {description} failed ({type(exc).__name__}: {detail}); "
            f"check --hf, --hf_name, --hf_split and your network")


def batched(iterable, size: int):
    """Consecutive lists of up to size items (bounds how far reading runs ahead of encoding)."""
    iterator = iter(iterable)
    while batch := list(islice(iterator, size)):
        yield batch


def shard_filename(name: str, index: int) -> str:
    split = "val" if index == 0 else "train"
    return f"{name}_{split}_{index:06d}.bin"


class ShardWriter:
    """Packs a token stream into shards of exactly shard_size tokens (the last may be shorter); without_eot names
    the shards that hold no EOT, the inside of one document only."""

    def __init__(self, out_dir: Path, name: str, shard_size: int):
        self.out_dir, self.name = out_dir, name
        self.buffer = np.empty(shard_size, dtype=np.uint16)
        self.filled = 0
        self.paths, self.without_eot = [], []

    def add(self, tokens: np.ndarray) -> None:
        while tokens.size:
            take = min(tokens.size, self.buffer.size - self.filled)
            self.buffer[self.filled:self.filled + take] = tokens[:take]
            self.filled += take
            tokens = tokens[take:]
            if self.filled == self.buffer.size:
                self._write()

    def close(self) -> None:
        if self.filled:
            self._write()

    def _write(self) -> None:
        path = self.out_dir / shard_filename(self.name, len(self.paths))
        shards.write_shard(path, self.buffer[:self.filled])
        self.paths.append(path)
        if not (self.buffer[:self.filled] == shards.EOT).any():
            self.without_eot.append(path.name)
        self.filled = 0


def existing_shards(out_dir: Path, name: str) -> list:
    pattern = glob.escape(name)  # a name such as x[1] is a name, not a pattern
    return sorted(out_dir.glob(f"{pattern}_val_*.bin")) + sorted(out_dir.glob(f"{pattern}_train_*.bin"))


def prepare_out_dir(out_dir: Path, name: str, overwrite: bool) -> None:
    """Create out_dir, naming any staging folder a killed run left there; refuse to mix with existing <name> shards
    unless overwrite (which replaces them only once the new shards are complete: publish_shards)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} is a file; give a folder as --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in sorted(out_dir.glob(f".{glob.escape(name)}-partial-*")):  # a run killed outright (no cleanup)
        print(f"warning: {stale} holds an interrupted run's unfinished shards; delete it once no other run of "
              f"fineweb.py writes there", file=sys.stderr)
    existing = existing_shards(out_dir, name)
    if existing and not overwrite:
        raise InputError(f"{out_dir} already holds {counted(len(existing), f'{name} shard')}; "
                         f"delete {'it' if len(existing) == 1 else 'them'} or pass --overwrite")


def publish_shards(staged: list, out_dir: Path, name: str) -> list:
    """Replace out_dir's <name> shards with the staged ones, which are complete: a run that fails earlier leaves
    out_dir as it was, never a partial set that looks valid. Ctrl-C or SIGTERM midway take effect once all are in."""
    published = []
    with stop_signals_held(f"the stop waited until every shard was in {display_dir(out_dir)}: the set is complete"):
        for path in existing_shards(out_dir, name):
            path.unlink()
        for path in staged:
            os.replace(path, out_dir / path.name)
            published.append(out_dir / path.name)
    return published


def tokenize(documents, writer: ShardWriter, workers: int, chunksize: int) -> tuple:
    """Encode documents in worker processes, in order, into writer; return (documents, tokens)."""
    n_documents = n_tokens = 0
    encoders = ProcessPoolExecutor(workers, initializer=start_worker)
    try:
        with tqdm(desc=f"tokenizing into {writer.name} shards", unit="tok", unit_scale=True) as progress:
            for batch in batched(documents, workers * chunksize * BATCHES_PER_WORKER):
                for tokens in encoders.map(encode_document, batch, chunksize=chunksize):
                    writer.add(tokens)
                    n_documents += 1
                    n_tokens += tokens.size
                    progress.update(tokens.size)
    except BrokenProcessPool:  # killed from outside, most often by the kernel's out-of-memory killer
        raise InputError(f"a tokenizer process died (killed, or out of memory?); rerun, with fewer --workers than "
                         f"{workers} if memory ran short") from None
    finally:  # after a failure the workers finish their current chunks only
        # A stop that cut the shutdown short (Ctrl-C pressed twice; timeout's SIGINT, sent to the run and then to its
        # group) left the workers, which ignore stop signals, waiting for work, and the run hung at its exit.
        with stop_signals_held():
            encoders.shutdown(cancel_futures=True)
    writer.close()
    return n_documents, n_tokens


def cpu_quota(cgroup: Path) -> int | None:
    """The cores a container's CPU quota allows, rounded up, from the cgroup files under cgroup: v2's cpu.max
    ("200000 100000", microseconds of CPU time per period; "max 100000" sets none), else v1's cpu/cpu.cfs_quota_us
    (-1 sets none) over cpu/cpu.cfs_period_us. None where no quota is set, or the files are missing or not numbers."""
    def fields(name: str) -> list:
        try:
            return (cgroup / name).read_text().split()
        except (OSError, UnicodeDecodeError):
            return []

    quota_period = fields("cpu.max")
    if len(quota_period) != 2:  # no cgroup v2 file (or an unreadable one): v1's pair
        quota_period = fields("cpu/cpu.cfs_quota_us") + fields("cpu/cpu.cfs_period_us")
    try:
        quota, period = (int(field) for field in quota_period)
    except ValueError:  # "max", garbage, or not two fields
        return None
    return (quota + period - 1) // period if quota >= 1 and period >= 1 else None


def usable_cores(cgroup: Path) -> int:
    """The cores this process may run on (a job scheduler's share of the machine, or taskset's), and no more than a
    container's CPU quota allows. os.cpu_count() counts all of the machine's: a tokenizer process each, with its
    batch of documents, overran the share's cores and memory; under a quota, the processes shared its cores' time."""
    if hasattr(os, "sched_getaffinity"):  # Linux
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1  # None where it cannot tell
    quota = cpu_quota(cgroup)
    return cores if quota is None else min(cores, quota)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", metavar="PATH", type=user_path,
                        help=".jsonl / .txt files or folders of them (or use --hf)")
    parser.add_argument("--hf", metavar="DATASET",
                        help="Hugging Face dataset to stream, e.g. HuggingFaceFW/fineweb")
    parser.add_argument("--hf_name", metavar="CONFIG", help="dataset config, e.g. sample-10BT")
    parser.add_argument("--hf_split", default="train", help="dataset split (default: train)")
    parser.add_argument("--text_field", default="text",
                        help="field holding the document text (default: text)")
    parser.add_argument("--name", default="fineweb",
                        help="shard file prefix: <name>_val_000000.bin, <name>_train_000001.bin, "
                             "... (default: fineweb)")
    parser.add_argument("--out", type=user_path,
                        help="output folder (default: data/<name>/ next to this script)")
    parser.add_argument("--shard_size", type=int, default=100_000_000,
                        help="tokens per shard (default: 100000000)")
    parser.add_argument("--workers", type=int, default=usable_cores(CGROUP),
                        help="tokenizer processes (default: one per core this process may use, within a "
                             "container's CPU quota)")
    parser.add_argument("--chunksize", type=int, default=16,
                        help="documents per task sent to a worker (default: 16)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing <name> shards in the output folder (once the new ones are complete)")
    args = parser.parse_args(argv)
    if bool(args.inputs) == bool(args.hf):
        parser.error("give either input PATHs or --hf DATASET (exactly one of them)")
    for option in ("shard_size", "workers", "chunksize"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1")
    if args.shard_size > MAX_SHARD_TOKENS:
        parser.error(f"--shard_size must be at most {MAX_SHARD_TOKENS:,} (a shard header counts its tokens in "
                     "an int32)")
    if os.sep in args.name or (os.altsep and os.altsep in args.name) or args.name in ("", ".", ".."):
        parser.error(f"--name {args.name!r} must be a file name prefix, without folders (use --out for those)")
    return args


def warn_where_the_tracks_fall_short(published: list, n_tokens: int, without_eot: list) -> None:
    """A warning line where the shards cannot serve a track run as it starts by default: no train shard, a val
    shard shorter than its validation, or train shards without an EOT (check_shards.py's rule)."""
    if len(published) == 1:
        print(f"warning: all {n_tokens:,} tokens fit in the val shard, so there is no train "
              f"shard; lower --shard_size to get some", file=sys.stderr)
    if (n_val := shards.read_header(published[0])) < TRACK_VAL_TOKENS:
        print(f"warning: the val shard holds {n_val:,} tokens, and the track scripts' default validation reads "
              f"{TRACK_VAL_TOKENS:,} (--val_tokens=10485760 and one more target); pass them a lower --val_tokens, or "
              f"use a --shard_size of at least {TRACK_VAL_TOKENS:,} on more text", file=sys.stderr)
    if without_eot:
        print(f"warning: no EOT in {', '.join(without_eot)}: only the inside of one document, where training starts "
              f"no sequence, and check_shards.py calls such a shard bad; tokenize again with another --shard_size",
              file=sys.stderr)


def no_documents(args) -> str:
    """The line for an input without a document: a dataset split without rows, or .jsonl files of blank lines only
    (a .txt file is a document even when empty)."""
    if args.hf:
        config = f"config {args.hf_name}, " if args.hf_name else ""  # none given: the dataset's default
        return (f"the input holds no documents: {args.hf} ({config}split {args.hf_split}) streamed no rows; check "
                f"--hf, --hf_name and --hf_split")
    return ('the input holds no documents: its .jsonl files hold blank lines only; give them one {"text": ...} a line '
            '(or pass .txt files, one document each)')


def run(args, out_dir: Path) -> str:
    """Tokenize the inputs named by args into shards in out_dir; return the summary line."""
    if args.hf:
        documents = open_hf_documents(args.hf, args.hf_name, args.hf_split, args.text_field)
    else:
        documents = iter_local_documents(list_input_files(args.inputs), args.text_field)
    try:
        load_encoder()
    except Exception as e:  # offline without a cached vocabulary, or tiktoken missing
        raise InputError(f"cannot load the GPT-2 tokenizer via tiktoken ({type(e).__name__}: {e}); "
                         f"connect to the internet once or set TIKTOKEN_CACHE_DIR to a folder "
                         f"holding its cached files") from None
    with removed_if_left_empty(out_dir):
        prepare_out_dir(out_dir, args.name, args.overwrite)
        staging = Path(tempfile.mkdtemp(prefix=f".{args.name}-partial-", dir=out_dir))
        try:
            writer = ShardWriter(staging, args.name, args.shard_size)
            n_documents, n_tokens = tokenize(documents, writer, args.workers, args.chunksize)
            if n_documents == 0:
                raise InputError(no_documents(args))
            published = publish_shards(writer.paths, out_dir, args.name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    warn_where_the_tracks_fall_short(published, n_tokens, writer.without_eot)
    return (f"{counted(n_documents, 'document')}, {counted(n_tokens, 'token')} -> {counted(len(published), 'shard')} "
            f"(1 val + {len(published) - 1} train) in {display_dir(out_dir)}")


def main(argv=None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out) if args.out is not None else DATA_DIR / args.name
    return finish(lambda: run(args, out_dir), InputError, out_dir, "permissions of the output folder",
                  "shards are moved in only once all are complete (rerun to start over)")


if __name__ == "__main__":
    sys.exit(main())
