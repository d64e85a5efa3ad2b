"""Download pre-tokenized FineWeb shards from the Hugging Face Hub.

    python data/cached_fineweb10B.py        # val shard + all 103 train shards (~20 GB)
    python data/cached_fineweb10B.py 8      # val shard + the first 8 train shards

Files land in data/<dataset>/ next to this script (--dir overrides). Files already
present and valid are skipped; each download goes to a staging folder first
(data/<dataset>/.partial/, where huggingface_hub resumes interrupted transfers) and
is moved under its final name only after its header and size check out. Every
failure ends in one "error: ..." line on stderr and exit code 1 (malformed arguments:
argparse's usage line and exit code 2).
"""

import argparse
import contextlib
import os
import shutil
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import getproxies

from tqdm import tqdm

import shards
from cli import display_dir, finish

# Pre-tokenized GPT-2 shards as published by the speedrun community on the Hugging Face Hub.
DATASETS = {
    "fineweb10B": dict(repo_id="kjj0/fineweb10B-gpt2", prefix="fineweb", train_shards=103),
    "fineweb10B-edu": dict(repo_id="kjj0/finewebedu10B-gpt2", prefix="finewebedu", train_shards=99),
    "fineweb100B": dict(repo_id="kjj0/fineweb100B-gpt2", prefix="fineweb", train_shards=1028),
}
DATA_DIR = Path(__file__).resolve().parent
STAGING_DIRNAME = ".partial"


class DownloadError(Exception):
    """A failure explained in one line: what went wrong and how to fix it."""


def download_file(repo_id: str, filename: str, dest_dir: Path) -> Path:
    """Download one file of a Hugging Face dataset repo into dest_dir and return its path.

    huggingface_hub keeps the partial transfer under dest_dir/.cache and resumes it on
    the next call. Tests replace this function with a local stand-in.
    """
    resolve_hub_host()
    from huggingface_hub import hf_hub_download
    return Path(hf_hub_download(repo_id, filename, repo_type="dataset", local_dir=dest_dir))


def resolve_hub_host():
    """Resolve the Hub's host name (socket.gaierror where that fails): offline, huggingface_hub retried five times
    (23 s, 11 lines) before failing. Skipped behind an HTTP(S) proxy, which resolves names itself, in
    huggingface_hub's offline mode, and for an HF_ENDPOINT without a host."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    proxied = any(scheme in getproxies() for scheme in ("https", "http", "all"))
    offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")  # the Hub's own rule
    if host and not proxied and (offline or "").upper() not in ("1", "ON", "YES", "TRUE"):
        socket.getaddrinfo(host, 443)


def explain_download_failure(exc: Exception, repo_id: str, filename: str, out_dir: Path) -> str:
    """Turn an exception raised by download_file into one line naming the cause and the fix."""
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, ImportError):
        return f"huggingface_hub is not installed ({detail}); pip install huggingface_hub"
    if isinstance(exc, socket.gaierror):
        return (f"cannot resolve the Hugging Face Hub's host ({detail}) to download {filename} (no network?); "
                f"check your connection (or HF_ENDPOINT) and rerun, finished files are kept")
    from huggingface_hub import errors as hf_errors
    if isinstance(exc, hf_errors.LocalEntryNotFoundError):
        return (f"cannot reach the Hugging Face Hub to download {filename} (no network?); "
                f"check your connection (or HF_ENDPOINT) and rerun, finished files are kept")
    if isinstance(exc, hf_errors.EntryNotFoundError):
        return (f"{filename} is missing from the dataset repo {repo_id}; "
                f"check N and --dataset (see --help for the shard counts)")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return (f"dataset repo {repo_id} not found on the Hugging Face Hub (or it is private or "
                f"gated); check --dataset, or run `hf auth login` if it needs access")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        return (f"the Hugging Face Hub refused {filename} from {repo_id} ({detail}); "
                f"rerun later to resume")
    if isinstance(exc, OSError) and (exc.errno is not None or exc.filename is not None):  # a file's, not requests'
        return (f"cannot write {filename} into {out_dir} ({exc.strerror or detail}); free disk "
                f"space (a shard is ~200 MB) or pick another --dir, then rerun to resume")
    return (f"downloading {filename} from {repo_id} failed ({type(exc).__name__}: {detail}); "
            f"rerun to resume")


def shard_filenames(prefix: str, n_train: int) -> list:
    """The val shard followed by the first n_train train shards."""
    return [f"{prefix}_val_000000.bin"] + [f"{prefix}_train_{i:06d}.bin" for i in range(1, n_train + 1)]


def present_token_count(path: Path):
    """Token count of a valid shard at path; None if absent. An invalid file is deleted."""
    if not path.exists():
        return None
    try:
        return shards.read_header(path)
    except shards.ShardError as e:
        tqdm.write(f"{e}; deleting it and downloading it again", file=sys.stderr)
        path.unlink()
        return None


def fetch_shard(repo_id: str, filename: str, out_dir: Path, staging_dir: Path) -> int:
    """Download one shard via the staging folder, validate it, move it in; return its token count."""
    try:
        staged = download_file(repo_id, filename, staging_dir)
    except Exception as exc:  # any failure becomes one explained line
        raise DownloadError(explain_download_failure(exc, repo_id, filename, out_dir)) from None
    try:
        n_tokens = shards.read_header(staged)
    except shards.ShardError as e:
        staged.unlink()
        raise DownloadError(f"downloaded {filename} is invalid and was deleted: {e}") from None
    os.replace(staged, out_dir / filename)
    return n_tokens


def parse_args(argv):
    table = "\n".join(f"  {name:15s} {spec['repo_id']:25s} {spec['train_shards']:5d} train shards"
                      for name, spec in DATASETS.items())
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=("datasets (GPT-2 token shards of 100M tokens each, as published by the speedrun "
                "community on the Hugging Face Hub; each also has one val shard):\n" + table),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n_train", metavar="N", type=int, nargs="?",
                        help="number of train shards to fetch (default: all of the dataset)")
    parser.add_argument("--dataset", choices=DATASETS, default="fineweb10B",
                        help="which pre-tokenized dataset (default: fineweb10B)")
    parser.add_argument("--dir", type=Path,
                        help="output folder (default: data/<dataset>/ next to this script)")
    return parser.parse_args(argv)


def download(dataset: str, n_train, out_dir: Path) -> str:
    """Fetch the val shard and n_train train shards into out_dir; return the summary line."""
    spec = DATASETS[dataset]
    n_train = spec["train_shards"] if n_train is None else n_train
    if not 0 <= n_train <= spec["train_shards"]:
        raise DownloadError(f"N={n_train} is out of range: {dataset} has {spec['train_shards']} "
                            f"train shards; pick N between 0 and {spec['train_shards']}")
    staging_dir = out_dir / STAGING_DIRNAME
    made_out_dir = not out_dir.exists()
    try:
        staging_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DownloadError(f"cannot create {staging_dir} ({e.strerror}); "
                            f"pick a writable --dir") from None
    filenames = shard_filenames(spec["prefix"], n_train)
    total_tokens = downloaded = already_present = 0
    try:
        with tqdm(filenames, desc=f"{dataset} shards", unit="file") as progress:  # closes on errors
            for filename in progress:
                n_tokens = present_token_count(out_dir / filename)
                if n_tokens is None:
                    n_tokens = fetch_shard(spec["repo_id"], filename, out_dir, staging_dir)
                    downloaded += 1
                else:
                    already_present += 1
                total_tokens += n_tokens
    except BaseException:
        with contextlib.suppress(OSError):  # empty folders go (staging, and out_dir if made here); partial files stay
            staging_dir.rmdir()
            if made_out_dir:
                out_dir.rmdir()
        raise
    shutil.rmtree(staging_dir, ignore_errors=True)
    return (f"{len(filenames)} files, {total_tokens:,} tokens in {display_dir(out_dir)} "
            f"({downloaded} downloaded, {already_present} already present)")


def main(argv=None) -> int:
    args = parse_args(argv)
    out_dir = args.dir if args.dir is not None else DATA_DIR / args.dataset
    return finish(lambda: download(args.dataset, args.n_train, out_dir), DownloadError, out_dir,
                  f"permissions of {out_dir}, then rerun to resume")


if __name__ == "__main__":
    sys.exit(main())
