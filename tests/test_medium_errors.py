"""train_gpt_medium.py rejects bad settings, data and machines with one `error:` line and exit status 2.

Every message is checked in-process; one case per kind of check also runs the script for real."""

import dataclasses
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "data"))
import shards  # noqa: E402
import train_gpt_medium as medium  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from stand_ins import documents  # noqa: E402

TINY = ["--device=cpu", "--compile=false", "--model_dim=64", "--num_heads=2", "--head_dim=32",
        "--train_seq_len=512", "--val_seq_len=512", "--val_tokens=1024", "--num_iterations=2"]

CASE_NAMES = ["missing files", "too few val tokens", "too few train tokens", "world size 3", "seq not multiple of 128",
              "val seq not multiple of 128", "heads x head_dim", "skip pair", "profile steps", "unknown setting",
              "malformed", "not a number", "magic shard", "version shard", "truncated shard", "corrupt shard",
              "short shard", "no cuda", "nan lr", "beta at 1", "no peak", "small vocabulary", "window backwards",
              "world size 0", "folder as shards", "custom pattern", "log exists", "no-attention block",
              "weight decay past zero", "dashes", "val split over 4 ranks", "fineweb pattern typo",
              "relative pattern", "custom pattern, no shards yet"]
# the ones also run as a real process: one per kind of check
PROCESS_CASES = ["malformed", "world size 3", "seq not multiple of 128", "missing files", "truncated shard", "no cuda"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("medium_errors")
    shards.write_shard(root / "good_train_000001.bin", documents(60_000))  # more than the default warmup's 80 sequences
    shards.write_shard(root / "good_val_000000.bin", documents(4_000))
    hand_made_shard(root / "magic.bin", [12345, 1, 10], 20)
    hand_made_shard(root / "version.bin", [shards.MAGIC, 2, 10], 20)
    hand_made_shard(root / "truncated.bin", [shards.MAGIC, 1, 10], 12)
    hand_made_shard(root / "corrupt.bin", [shards.MAGIC, 1, 10], 24)
    (root / "short.bin").write_bytes(bytes(100))
    (root / "earlier.txt").write_text("an earlier run's log\n")
    (root / "downloaded").mkdir()
    (root / "downloaded" / "fineweb_val_000000.bin").write_bytes(b"")  # FineWeb is here: a pattern's typo is the fault
    return root


def shard_error(path: Path) -> str:
    with pytest.raises(shards.ShardError) as error:
        shards.read_header(path)
    return str(error.value)


def cases(folder: Path) -> dict:
    """name -> (arguments, extra environment, expected message: exact text, or a fragment after '~')."""
    good = [f"--train_files={folder}/good_train_*.bin", f"--val_files={folder}/good_val_*.bin"]
    found = {
        "missing files": (TINY + [f"--train_files={folder}/fineweb10B/fineweb_*.bin", good[1]], {},
                          f"--train_files={folder}/fineweb10B/fineweb_*.bin matches no files; download FineWeb with: "
                          "python data/cached_fineweb10B.py 35"),
        "too few val tokens": (TINY + good + ["--val_tokens=8192"], {},
                               "~hold 4000 tokens but --val_tokens=8192 needs 8193"),
        "too few train tokens": (TINY + good + ["--num_iterations=1000"], {},
                                 "~the run needs 8000 (1000 steps x 1 process(es) x 8 micro-step(s)); add train "
                                 "shards (~80 like these in all) or lower --num_iterations"),
        "world size 3": (TINY + good, {"WORLD_SIZE": "3"}, "~world size 3 does not divide 8"),
        "seq not multiple of 128": (TINY + good + ["--train_seq_len=500"], {},
                                    "--train_seq_len=500 is not a multiple of 128 (the attention block size); "
                                    "round it to one"),
        "val seq not multiple of 128": (TINY + good + ["--val_seq_len=1000"], {}, "~--val_seq_len=1000 is not"),
        "heads x head_dim": (TINY + good + ["--num_heads=3"], {}, "~must equal --model_dim=64"),
        "skip pair": (TINY + good + ["--skip_connections=9>6"], {}, "~--skip_connections=9>6: write pairs"),
        "profile steps": (TINY + good + ["--warmup_steps=1", "--profile_steps=1"], {}, "~must be below"),
        "unknown setting": (TINY + good + ["--nope=1"], {}, "unknown setting --nope (see --help for the list)"),
        "malformed": (TINY + good + ["--device", "cpu"], {}, "~malformed argument '--device'"),
        "not a number": (TINY + good + ["--muon_lr=fast"], {}, "--muon_lr=fast is not a number"),
        "nan lr": (TINY + good + ["--head_lr=nan"], {}, "--head_lr=nan must be a finite number >= 0"),
        "beta at 1": (TINY + good + ["--adam_beta2=1"], {}, "--adam_beta2=1.0 must be in [0, 1)"),
        "no peak": (TINY + good + ["--peak_tflops=0"], {}, "--peak_tflops=0 must be above 0"),
        "small vocabulary": (TINY + good + ["--vocab_size=1000"], {}, "~must be above the GPT-2 token ids"),
        "window backwards": (TINY + good + ["--window_start=1024", "--window_end=128"], {},
                             "~--window_start=1024 is above --window_end=128"),
        "world size 0": (TINY + good, {"WORLD_SIZE": "0"}, "~world size 0 does not divide 8"),
        "folder as shards": (TINY + [f"--train_files={folder}/", good[1]], {},
                             f"--train_files={folder}/ matches a folder, {folder}/; the pattern names shard files, "
                             f"e.g. '{folder}/*_train_*.bin'"),
        "custom pattern": (TINY + [f"--train_files={folder}/mine_*.bin", good[1]], {},
                           "~check the pattern (a glob of shard files"),
        # no .bin file beside it, but no FineWeb pattern either: it is the pattern to check, not a download to run
        "custom pattern, no shards yet": (TINY + [f"--train_files={folder}/mine/nothing_*.bin", good[1]], {},
                                          f"--train_files={folder}/mine/nothing_*.bin matches no files; check the "
                                          "pattern (a glob of shard files, e.g. 'data/<name>/<name>_train_*.bin')"),
        "relative pattern": (TINY + ["--train_files=nowhere/fineweb_train_*.bin", good[1]], {},
                             "--train_files=nowhere/fineweb_train_*.bin matches no files (a relative pattern, read "
                             f"from {os.getcwd()}); download FineWeb with: python data/cached_fineweb10B.py 35"),
        "fineweb pattern typo": (TINY + [f"--train_files={folder}/downloaded/fineweb_trian_*.bin", good[1]], {},
                                 f"--train_files={folder}/downloaded/fineweb_trian_*.bin matches no files; check the "
                                 "pattern (a glob of shard files, e.g. 'data/<name>/<name>_train_*.bin')"),
        "no-attention block": (TINY + good + ["--no_attention_layer=16"], {},
                               "--no_attention_layer=16: use -1 (none) or a block index from 0 to 15"),
        "weight decay past zero": (TINY + good + ["--muon_weight_decay=30"], {}, "~lower --muon_weight_decay"),
        "dashes": (TINY + good + ["--num-iterations=5"], {},
                   "--num-iterations: setting names are written with underscores, --num_iterations"),
        # 2 validation sequences of 512 for 4 ranks: 1024 // 2048 = 0 steps each, a 0/0 loss would stop the run
        "val split over 4 ranks": (TINY + good, {"WORLD_SIZE": "4"},
                                   "--val_tokens=1024 is not a multiple of world_size x val_seq_len = 2048; change "
                                   "--val_tokens or --val_seq_len"),
        "log exists": (TINY + good + [f"--logs_dir={folder}", "--run_id=earlier"], {},
                       f"{folder}/earlier.txt exists (an earlier run's log); pass another --run_id, or move that file"),
    }
    for name in ["magic", "version", "truncated", "corrupt", "short"]:
        found[f"{name} shard"] = (TINY + [f"--train_files={folder}/{name}.bin", good[1]], {},
                                  shard_error(folder / f"{name}.bin"))
    if not torch.cuda.is_available():
        found["no cuda"] = ([a for a in TINY if a != "--device=cpu"] + good, {},
                            "CUDA is not available; run on a GPU machine, or pass --device=cpu for a tiny CPU run")
    return found


def first_error(args: list[str], env: dict) -> str:
    """The SetupError text of what main() checks before it builds anything."""
    world_size = int(env.get("WORLD_SIZE", "1"))
    with pytest.raises(medium.SetupError) as error:
        settings = medium.parse_args(args)
        medium.check_settings(settings, world_size)
        medium.check_data(settings, world_size, settings.grad_accum_steps or 8 // world_size)
    return str(error.value)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_each_message(name, folder):
    expected = cases(folder).get(name)
    if expected is None:
        pytest.skip("CUDA is available here")
    args, env, message = expected
    if message.startswith("~"):
        assert message[1:] in first_error(args, env)
    else:
        assert first_error(args, env) == message


@pytest.fixture(scope="module")
def results(folder):
    """The script run for real on a few cases, one per kind of check, two at a time (each imports torch)."""
    def run(case):
        args, env = case[:2]
        clean = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
        return subprocess.run([sys.executable, "train_gpt_medium.py", *args], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120, env={**clean, **env})

    chosen = {name: case for name, case in cases(folder).items() if name in PROCESS_CASES}
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(chosen, pool.map(run, chosen.values())))


@pytest.mark.parametrize("name", PROCESS_CASES)
def test_one_error_line_and_exit_status_2(name, folder, results):
    if name not in results:
        pytest.skip("CUDA is available here")
    result = results[name]
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr == f"error: {first_error(*cases(folder)[name][:2])}\n"


def test_the_shard_cases_really_are_the_shard_readers_errors(folder):
    names = ["magic", "version", "truncated", "corrupt", "short"]
    texts = {name: shard_error(folder / f"{name}.bin") for name in names}
    assert "not a speedrun shard" in texts["magic"] and "unsupported shard version 2" in texts["version"]
    assert "truncated" in texts["truncated"] and "corrupt" in texts["corrupt"] and "shorter" in texts["short"]


def test_check_only_accepts_good_settings(folder):
    result = subprocess.run([sys.executable, "train_gpt_medium.py", *TINY, "--check_only=true",
                             f"--train_files={folder}/good_train_*.bin", f"--val_files={folder}/good_val_*.bin"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok: settings, data and device checked for world size 1\n"


def test_unreadable_compile_cache_is_one_error_line(folder, tmp_path):
    cache = tmp_path / "artifacts.bin"
    cache.write_bytes(b"truncated download")
    good = [f"--train_files={folder}/good_train_*.bin", f"--val_files={folder}/good_val_*.bin"]
    clean = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, "train_gpt_medium.py", *TINY, *good, f"--compile_cache={cache}"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=clean)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr == (f"error: --compile_cache={cache} could not be loaded (corrupt, or not torch.compile "
                             "artifacts); delete it to compile from scratch and write a new one\n")


def fake_gpu(monkeypatch, capability):
    """One GPU of this compute capability."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


def test_mlp_epilogue_on_a_gpu_older_than_sm_90_is_one_error_line(folder, monkeypatch):
    fake_gpu(monkeypatch, (8, 0))
    gpu = [a for a in TINY if a != "--device=cpu"] + [f"--train_files={folder}/good_train_*.bin",
                                                      f"--val_files={folder}/good_val_*.bin"]
    assert first_error(gpu, {}) == ("--mlp_epilogue needs TMA, on sm_90 or newer (this GPU is sm_80); pass "
                                    "--mlp_epilogue=false")
    medium.check_settings(medium.parse_args(gpu + ["--mlp_epilogue=false"]), 1)  # the fix it names passes


@pytest.mark.parametrize("epilogue", ["true", "false"])
def test_a_gpu_without_bf16_tensor_cores_is_one_error_line(folder, monkeypatch, epilogue):
    """Before sm_80 (a T4, a V100) ptxas builds no bf16 kernel: with --mlp_epilogue=false the checks passed and the
    run failed in the compile or the kernel builds, a traceback; track 1 names its own floor (sm_89) up front."""
    fake_gpu(monkeypatch, (7, 5))
    gpu = [a for a in TINY if a != "--device=cpu"] + [f"--train_files={folder}/good_train_*.bin",
                                                      f"--val_files={folder}/good_val_*.bin"]
    assert first_error(gpu + [f"--mlp_epilogue={epilogue}"], {}) == (
        "the bf16 model and its Triton kernels need bf16 tensor cores, on sm_80 or newer (this GPU is sm_75); run on "
        "an A100, H100, L4 or newer")
    fake_gpu(monkeypatch, (8, 0))
    medium.check_settings(medium.parse_args(gpu + ["--mlp_epilogue=false"]), 1)  # the floor itself passes


def test_mlp_epilogue_with_rows_tma_cannot_take_is_one_error_line(folder, monkeypatch):
    """TMA descriptors need 16-byte rows: 5 heads of 132 (model_dim 660) passed every other check and crashed in
    warmup step 1, after the compile."""
    fake_gpu(monkeypatch, (9, 0))
    gpu = [a for a in TINY if a not in ("--device=cpu", "--model_dim=64", "--num_heads=2", "--head_dim=32")]
    gpu += ["--model_dim=660", "--num_heads=5", "--head_dim=132", f"--train_files={folder}/good_train_*.bin",
            f"--val_files={folder}/good_val_*.bin"]
    assert first_error(gpu, {}) == ("--model_dim=660 must be a multiple of 8 for --mlp_epilogue (TMA needs rows of "
                                    "16 bytes); change --num_heads or --head_dim, or pass --mlp_epilogue=false")
    medium.check_settings(medium.parse_args(gpu + ["--mlp_epilogue=false"]), 1)  # the fix it names passes


def test_skip_pairs_cut_by_an_unquoted_shell_redirect_say_to_quote_them(folder, tmp_path):
    """Typed unquoted, --skip_connections=6>9,4>10 reaches the script as --skip_connections=6 (the shell sends the
    output to files named 9,4 and 10): the line says to quote the setting, which a value with no '>' needs."""
    good = [f"--train_files={folder}/good_train_*.bin", f"--val_files={folder}/good_val_*.bin"]
    command = " ".join([sys.executable, str(REPO_ROOT / "train_gpt_medium.py"), *TINY, *good,
                        "--skip_connections=6>9,4>10"])
    clean = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=clean)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["10", "9,4"]  # the shell's redirects
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == ("error: --skip_connections=6: write pairs a>b with a < b, comma-separated, e.g. "
                             "6>9,4>10; in a shell, quote the setting ('--skip_connections=6>9,4>10'): an unquoted > "
                             "sends the output to a file\n")
    assert first_error(TINY + good + ["--skip_connections=9>6"], {}) == (  # a '>' typed: no shell hint
        "--skip_connections=9>6: write pairs a>b with a < b, comma-separated, e.g. 6>9,4>10")


def test_too_little_fineweb_data_names_the_download_of_the_shards_the_run_wants():
    """Track 2 reads 3.4B tokens: one FineWeb shard of 35 a default run wants names the command for all 35."""
    assert medium.shards_wanted("data/fineweb10B/fineweb_train_*.bin", 1, 1_000, 34_500) == (
        " (~35 in all: python data/cached_fineweb10B.py 35)")
    assert medium.shards_wanted("data/mine/mine_train_*.bin", 2, 0, 10) == ""  # no whole sequence: no rate


# ----------------------------------------------------------------------------------------------
# The record's defaults, and each check at the edges of its range: exactly at a limit passes, one step past is an error


def test_defaults_are_the_8_gpu_record():
    """The 8-GPU record run (records/track_2_medium/), every setting: a changed default is a deliberate edit."""
    args = medium.Hyperparameters()
    assert medium.parse_args([]) == args
    assert args.train_files == "data/fineweb10B/fineweb_train_*.bin"
    assert args.val_files == "data/fineweb10B/fineweb_val_*.bin"
    assert args.val_tokens == 10_485_760
    assert (args.train_seq_len, args.val_seq_len) == (64 * 1024, 4 * 64 * 1024)
    assert args.grad_accum_steps == 0  # resolved to 8 // world_size at launch
    assert (args.num_iterations, args.cooldown_frac, args.final_lr_frac, args.val_loss_every) == (6450, 0.6, 0.0, 125)
    assert (args.window_start, args.window_end) == (0, 1728)  # 1 block -> 14 blocks (1792 tokens)
    assert (args.vocab_size, args.num_layers, args.model_dim) == (50257, 16, 1024)
    assert (args.num_heads, args.head_dim, args.mlp_ratio, args.mlp_epilogue) == (8, 128, 4, True)
    assert (args.no_attention_layer, args.window_pattern) == (7, "LSSSLSSSSSSLSSSL")
    assert args.skip_connections == "6>9,4>10,2>11"
    assert (args.muon_lr, args.muon_momentum, args.muon_momentum_start) == (0.025, 0.95, 0.85)
    assert args.muon_momentum_warmup_steps == 300
    assert (args.muon_weight_decay, args.mlp_weight_decay_mult) == (0.01, 2.0)
    assert (args.embed_lr, args.scalar_lr, args.head_lr) == (0.3, 0.015, 1 / 320)
    assert (args.adam_beta1, args.adam_beta2, args.adam_eps) == (0.8, 0.95, 1e-10)
    assert (args.warmup_steps, args.profile_steps, args.seed) == (10, 0, 0)
    assert (args.device, args.compile, args.compile_cache) == ("cuda", True, "")
    assert (args.logs_dir, args.run_id, args.peak_tflops, args.check_only) == ("logs", "", 989.0, False)
    assert len(dataclasses.fields(args)) == 44  # a new setting gets its line above


@pytest.mark.parametrize("overrides", [
    dict(num_iterations=1, val_loss_every=0, warmup_steps=0, muon_momentum_warmup_steps=0),
    dict(train_seq_len=128, val_seq_len=128, val_tokens=128),
    dict(muon_momentum=0.0, muon_momentum_start=0.0, adam_beta1=0.0, adam_beta2=0.0),
    dict(cooldown_frac=1.0, final_lr_frac=1.0),
    dict(muon_lr=1.0, muon_weight_decay=0.499),  # the MLP matrices' decay: 1 x 0.499 x 2, just below 1
    dict(seed=2**63 - 1),
    dict(window_start=1728),  # = window_end: a fixed window
    dict(window_end=2**24),
    dict(warmup_steps=2, profile_steps=1),
    dict(num_layers=6, window_pattern="LSSSSL", no_attention_layer=5),
    dict(model_dim=64, num_heads=16, head_dim=4),
])
def test_settings_at_the_edges_of_their_ranges_pass(overrides):
    medium.check_settings(medium.Hyperparameters(device="cpu", **overrides), 1)


@pytest.mark.parametrize("overrides, message", [
    (dict(val_tokens=0), "--val_tokens=0 must be positive"),  # passed every check, then validated nothing
    (dict(window_start=-1), "--window_start=-1 must be >= 0"),
    (dict(muon_momentum=1.0), "--muon_momentum=1.0 must be in [0, 1)"),
    (dict(adam_eps=0.0), "--adam_eps=0 must be above 0"),
    (dict(cooldown_frac=1.5), "--cooldown_frac=1.5 must be in [0, 1]"),
    (dict(final_lr_frac=1.5), "--final_lr_frac=1.5 must be in [0, 1]"),
    (dict(seed=-1), "--seed=-1 must be in [0, 2^63)"),
    (dict(seed=2**63), f"--seed={2**63} must be in [0, 2^63)"),
    # the attention matrices decay at lr x weight decay itself: past 1 with an MLP multiplier below 1 too
    (dict(muon_lr=0.5, muon_weight_decay=3.0, mlp_weight_decay_mult=0.5),
     "Muon's weight decay takes a matrix's weights to zero or past it each step (lr x weight decay = 1.5 >= 1); "
     "lower --muon_weight_decay"),
    (dict(muon_lr=1.0, muon_weight_decay=0.5),  # the MLP matrices' decay: exactly 1 zeroes them each step
     "Muon's weight decay takes a matrix's weights to zero or past it each step (lr x weight decay x "
     "--mlp_weight_decay_mult = 1 >= 1); lower --muon_weight_decay or --mlp_weight_decay_mult"),
    (dict(vocab_size=50256), "--vocab_size=50256 must be above the GPT-2 token ids of the shards (up to 50256, end of "
                             "text): at least 50257"),
    (dict(train_seq_len=64), "--train_seq_len=64 is not a multiple of 128 (the attention block size); round it to one"),
    (dict(window_end=2**24 + 1), f"--window_end={2**24 + 1} is above {2**24} tokens; a window past the sequence "
                                 "length changes nothing"),
    (dict(model_dim=60, num_heads=2, head_dim=30), "--head_dim=30 must be a multiple of 4 (half-truncated rotary)"),
    (dict(num_layers=5, window_pattern="LSSSL", no_attention_layer=-1),
     "--num_layers=5: at least 6 blocks (value embeddings on the first and last three)"),
    (dict(window_pattern="LSSSLSSSSSSLSSS"),
     "--window_pattern=LSSSLSSSSSSLSSS needs one L or S per block (16 letters)"),
    (dict(window_pattern="LSSSLSSSSSSLSSSX"),
     "--window_pattern=LSSSLSSSSSSLSSSX needs one L or S per block (16 letters)"),
    (dict(skip_connections="5>5"),
     "--skip_connections=5>5: write pairs a>b with a < b, comma-separated, e.g. 6>9,4>10"),
    (dict(device="tpu"), "--device=tpu: use cuda or cpu"),
    # each passed a mutation of its check before (the first three are track 1's cases, missing here)
    (dict(train_seq_len=2**31), f"--train_seq_len={2**31} must be below 2^31"),
    (dict(muon_lr=-0.01), "--muon_lr=-0.01 must be a finite number >= 0"),
    (dict(muon_momentum_start=1.5), "--muon_momentum_start=1.5 must be in [0, 1)"),
    (dict(window_pattern="LSSSLSSSSSSLSSSLL"),  # one letter more than blocks, not only fewer
     "--window_pattern=LSSSLSSSSSSLSSSLL needs one L or S per block (16 letters)"),
    (dict(muon_lr=1.0, muon_weight_decay=1.5, mlp_weight_decay_mult=1.0),  # no larger MLP decay: only the setting's
     "Muon's weight decay takes a matrix's weights to zero or past it each step (lr x weight decay = 1.5 >= 1); "
     "lower --muon_weight_decay"),
    (dict(compile_cache="."), "--compile_cache=. is not a readable file; give a file path (written after the warmup "
                              "when missing)"),
])
def test_values_one_step_past_each_limit_are_errors(overrides, message):
    with pytest.raises(medium.SetupError) as error:
        medium.check_settings(medium.Hyperparameters(**{"device": "cpu", **overrides}), 1)
    assert str(error.value) == message


def test_mlp_epilogue_takes_any_model_dim_of_16_byte_rows(monkeypatch):
    fake_gpu(monkeypatch, (9, 0))
    medium.check_settings(medium.Hyperparameters(model_dim=24, num_heads=2, head_dim=12), 1)  # 48-byte bf16 rows
