"""Download pre-tokenized FineWeb shards from the Hugging Face Hub.

    python data/cached_fineweb10B.py        # val shard + all 103 train shards (~20 GB)
    python data/cached_fineweb10B.py 8      # val shard + the first 8 train shards

Files land in data/<dataset>/ next to this script (--dir overrides). Files already
present and valid are skipped, so a rerun fetches only the missing ones (an invalid one,
e.g. cut off, is removed in one line saying why and downloaded again; a valid one of
another token count than the Hub's is kept, with a warning); each download
goes to a staging folder first (data/<dataset>/.partial/) and is moved under its final
name only after its header and size check out. A file cut off midway starts over on the
next run (huggingface_hub releases before mid-2026 resumed it from the staging folder).
HF_ENDPOINT points the download at a Hub mirror. Every failure ends in one "error: ..."
line on stderr and exit code 1 (malformed arguments: argparse's usage line and exit code 2).
"""

import argparse
import os
import shutil
import socket
import sys
import warnings
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import getproxies

from tqdm import tqdm

import shards
from cli import counted, display_dir, finish, removed_if_left_empty, user_path

# Pre-tokenized GPT-2 shards as published by the speedrun community on the Hugging Face Hub.
DATASETS = {
    "fineweb10B": dict(repo_id="kjj0/fineweb10B-gpt2", prefix="fineweb", train_shards=103),
    "fineweb10B-edu": dict(repo_id="kjj0/finewebedu10B-gpt2", prefix="finewebedu", train_shards=99),
    "fineweb100B": dict(repo_id="kjj0/fineweb100B-gpt2", prefix="fineweb", train_shards=1028),
}
# Every shard of these repos holds this many tokens but perhaps a dataset's last train shard: llm.c's
# dev/data/fineweb.py, which wrote them (its header, magic 20240520), fills shards of 10**8 tokens and writes the rest
# last.
SHARD_TOKENS = 100_000_000
DATA_DIR = Path(__file__).resolve().parent
STAGING_DIRNAME = ".partial"
HUB_CONNECT_TIMEOUT = 10  # seconds


class DownloadError(Exception):
    """A failure explained in one line: what went wrong and how to fix it."""


def hub_endpoint() -> str:
    """The Hub's address: HF_ENDPOINT where set (a mirror), else huggingface.co (huggingface_hub's own rule)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_name() -> str:
    """The Hub as an error line names it: the mirror's address where HF_ENDPOINT is set."""
    return f"HF_ENDPOINT {hub_endpoint()}" if "HF_ENDPOINT" in os.environ else "the Hugging Face Hub"


def download_file(repo_id: str, filename: str, dest_dir: Path) -> Path:
    """Download one file of a Hugging Face dataset repo into dest_dir and return its path.

    huggingface_hub keeps its lock and metadata files under dest_dir/.cache. Tests replace this function with a
    local stand-in, or point HF_ENDPOINT at a local stand-in of the Hub.
    """
    endpoint = hub_endpoint()
    connect_to_hub(endpoint)
    from huggingface_hub import hf_hub_download
    # Its warning of too little disk space (two lines, for each of two folders, the second one its source line)
    # came before the write failed: the error line after it says so, with the fix.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Not enough free disk space", UserWarning)
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", local_dir=dest_dir, endpoint=endpoint))


def connect_to_hub(endpoint: str):
    """Open and close one connection to the Hub's host (socket.gaierror where its name does not resolve,
    ConnectionError or TimeoutError where it cannot be reached): offline or refused, huggingface_hub retried five
    times (23 s, 11 lines) before failing. Skipped behind an HTTP(S) proxy, which resolves and connects itself, in
    huggingface_hub's offline mode, and for an endpoint without a host (https:// alone: huggingface_hub's
    error)."""
    url = urlparse(endpoint)
    proxied = any(scheme in getproxies() for scheme in ("https", "http", "all"))
    offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")  # the Hub's own rule
    if url.hostname and not proxied and (offline or "").upper() not in ("1", "ON", "YES", "TRUE"):
        port = url.port or (80 if url.scheme == "http" else 443)
        socket.create_connection((url.hostname, port), timeout=HUB_CONNECT_TIMEOUT).close()


def http_status(exc: BaseException) -> int | None:
    """The HTTP status a server answered with, from the errors chained under exc (huggingface_hub raises
    LocalEntryNotFoundError from the HEAD request's error); None where no server answered."""
    while exc is not None:
        response = getattr(exc, "response", None)
        if getattr(response, "status_code", None) is not None:
            return response.status_code
        exc = exc.__cause__ or exc.__context__
    return None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name where it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def explain_download_failure(exc: Exception, repo_id: str, filename: str, out_dir: Path) -> str:
    """Turn an exception raised by download_file into one line naming the cause and the fix."""
    detail = first_line(exc)
    hub, rerun = hub_name(), "rerun, finished files are kept"
    if isinstance(exc, ImportError):
        return f"huggingface_hub is not installed ({detail}); pip install huggingface_hub"
    if isinstance(exc, socket.gaierror):
        return (f"cannot resolve the host of {hub} ({detail}) to download {filename} (no network?); "
                f"check your connection (or HF_ENDPOINT) and {rerun}")
    if isinstance(exc, (ConnectionError, TimeoutError)):  # connect_to_hub's
        return (f"cannot connect to {hub} ({exc.strerror or detail}) to download {filename}; "
                f"check your connection (or HF_ENDPOINT) and {rerun}")
    from huggingface_hub import errors as hf_errors
    if isinstance(exc, hf_errors.LocalEntryNotFoundError):  # raised from the failed HEAD request's error
        status, cause = http_status(exc), exc.__cause__
        if status is None:
            reason = f"{type(cause).__name__}: {first_line(cause)}" if cause else "no network?"
            return (f"cannot reach {hub} to download {filename} ({reason}); "
                    f"check your connection (or HF_ENDPOINT) and {rerun}")
        not_a_hub = status < 500 and "HF_ENDPOINT" in os.environ  # a Hub's own refusals carry an error code
        fix = "point HF_ENDPOINT at a Hugging Face Hub or a mirror of one" if not_a_hub else (
            "rerun later, finished files are kept")
        return f"{hub} answered HTTP {status} for {filename} from {repo_id}; {fix}"
    if isinstance(exc, hf_errors.EntryNotFoundError):
        return (f"{filename} is missing from the dataset repo {repo_id}; "
                f"check N and --dataset (see --help for the shard counts)")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return (f"dataset repo {repo_id} not found on {hub} (or it is private or "
                f"gated); check --dataset, or run `hf auth login` if it needs access")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        return f"{hub} refused {filename} from {repo_id} ({detail}); rerun later, finished files are kept"
    if isinstance(exc, OSError) and (exc.errno is not None or exc.filename is not None):  # a file's, not requests'
        return (f"cannot write {filename} into {out_dir} ({exc.strerror or detail}); free disk "
                f"space (a shard is ~200 MB) or pick another --dir, then {rerun}")
    return f"downloading {filename} from {repo_id} failed ({type(exc).__name__}: {detail}); {rerun}"


def shard_filenames(prefix: str, n_train: int) -> list:
    """The val shard followed by the first n_train train shards."""
    return [f"{prefix}_val_000000.bin"] + [f"{prefix}_train_{i:06d}.bin" for i in range(1, n_train + 1)]


def present_token_count(path: Path):
    """Token count of a valid shard at path; None if absent. An invalid file is removed, in one line saying why."""
    if not path.exists():
        return None
    try:
        return shards.read_header(path)
    except shards.ShardError as e:
        path.unlink()
        tqdm.write(f"removed {display_dir(path.parent)}{path.name}: {e.problem}; downloading it again", file=sys.stderr)
        return None


def expected_tokens(spec: dict, filename: str) -> int | None:
    """The tokens of filename in the dataset's repo: SHARD_TOKENS, or None for its last train shard (the rest)."""
    return None if filename == f"{spec['prefix']}_train_{spec['train_shards']:06d}.bin" else SHARD_TOKENS


def warn_if_not_the_hubs(path: Path, n_tokens: int, dataset: str):
    """One line where a valid shard found in place holds other than the Hub's count of tokens for its name (a shard
    of another corpus or shard size, under this name): it is kept, as the user may mean it."""
    expected = expected_tokens(DATASETS[dataset], path.name)
    if expected is not None and n_tokens != expected:
        tqdm.write(f"warning: {display_dir(path.parent)}{path.name} holds {counted(n_tokens, 'token')} where "
                   f"{dataset}'s holds {expected:,}, so it is not the Hub's shard; kept as present: delete it and "
                   f"rerun to download the Hub's", file=sys.stderr)


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


def make_staging_dir(staging_dir: Path):
    """Create the staging folder when a shard is to be downloaded, not before: a folder that already holds every
    shard is only read, and may be read-only (a shared copy of the data)."""
    try:
        staging_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DownloadError(f"cannot create {staging_dir} ({e.strerror}); pick a writable --dir") from None


def holds_partial_transfer(staging_dir: Path) -> bool:
    """Whether a failed run's staging folder holds part of a file (an older huggingface_hub resumes it)."""
    return any(path.stat().st_size for path in staging_dir.rglob("*.incomplete"))


def parse_args(argv):
    table = "\n".join(f"  {name:15s} {spec['repo_id']:25s} {spec['train_shards']:5d} train shards"
                      for name, spec in DATASETS.items())
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(f"datasets (GPT-2 token shards of {SHARD_TOKENS // 10**6}M tokens each, the last train shard perhaps "
                f"fewer, as published by the speedrun community on the Hugging Face Hub; each also has one val "
                f"shard):\n" + table),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n_train", metavar="N", type=int, nargs="?",
                        help="number of train shards to fetch (default: all of the dataset)")
    parser.add_argument("--dataset", choices=DATASETS, default="fineweb10B",
                        help="which pre-tokenized dataset (default: fineweb10B)")
    parser.add_argument("--dir", type=user_path,
                        help="output folder (default: data/<dataset>/ next to this script)")
    return parser.parse_args(argv)


def download(dataset: str, n_train, out_dir: Path) -> str:
    """Fetch the val shard and n_train train shards into out_dir; return the summary line."""
    spec = DATASETS[dataset]
    n_train = spec["train_shards"] if n_train is None else n_train
    if not 0 <= n_train <= spec["train_shards"]:
        raise DownloadError(f"N={n_train} is out of range: {dataset} has {spec['train_shards']} "
                            f"train shards; pick N between 0 and {spec['train_shards']}")
    endpoint = urlparse(hub_endpoint())
    if endpoint.scheme not in ("http", "https"):
        raise DownloadError(f"HF_ENDPOINT={os.environ['HF_ENDPOINT']} is not an http:// or https:// address; "
                            f"write it as https://<host>")
    try:
        port_problem = "port 0" if endpoint.port == 0 else ""
    except ValueError as e:  # out of range, or not a number
        port_problem = first_line(e)
    if port_problem:
        raise DownloadError(f"HF_ENDPOINT={os.environ['HF_ENDPOINT']} has no usable port ({port_problem}); give one "
                            f"from 1 to 65535, or none (https://<host>)")
    staging_dir = out_dir / STAGING_DIRNAME
    filenames = shard_filenames(spec["prefix"], n_train)
    total_tokens = downloaded = already_present = 0
    with removed_if_left_empty(out_dir):
        try:
            with tqdm(filenames, desc=f"{dataset} shards", unit="file") as progress:  # closes on errors
                for filename in progress:
                    n_tokens = present_token_count(out_dir / filename)
                    if n_tokens is None:
                        make_staging_dir(staging_dir)
                        n_tokens = fetch_shard(spec["repo_id"], filename, out_dir, staging_dir)
                        downloaded += 1
                    else:
                        warn_if_not_the_hubs(out_dir / filename, n_tokens, dataset)
                        already_present += 1
                    total_tokens += n_tokens
        except BaseException:
            if not holds_partial_transfer(staging_dir):  # only huggingface_hub's lock and metadata files
                shutil.rmtree(staging_dir, ignore_errors=True)
            raise
    shutil.rmtree(staging_dir, ignore_errors=True)
    return (f"{counted(len(filenames), 'file')}, {counted(total_tokens, 'token')} in {display_dir(out_dir)} "
            f"({downloaded} downloaded, {already_present} already present){run_settings(out_dir, spec['prefix'])}")


def run_settings(out_dir: Path, prefix: str) -> str:
    """A line with the settings that point a run at shards outside the tracks' default (data/fineweb10B/fineweb_*):
    another dataset, or --dir. Relative to the repository, where run.sh reads them, when they lie below it."""
    folder = out_dir.resolve()
    if folder == DATA_DIR / "fineweb10B" and prefix == "fineweb":
        return ""
    if folder.is_relative_to(DATA_DIR.parent):
        folder = folder.relative_to(DATA_DIR.parent)
    return (f"\nrun on them with: ./run.sh --train_files='{folder / prefix}_train_*.bin' "
            f"--val_files='{folder / prefix}_val_*.bin'")


def main(argv=None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.dir) if args.dir is not None else DATA_DIR / args.dataset
    return finish(lambda: download(args.dataset, args.n_train, out_dir), DownloadError, out_dir,
                  f"permissions of {out_dir}, then rerun to resume", "rerun to resume, finished files are kept")


if __name__ == "__main__":
    sys.exit(main())
