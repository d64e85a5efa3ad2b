"""train_gpt.py, section "Hyperparameters": record defaults, --name=value parsing, --help, errors."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt  # noqa: E402
import train_gpt_medium  # noqa: E402
from train_gpt import Hyperparameters, SetupError, parse_args  # noqa: E402
from stand_ins import deny_access  # noqa: E402


def test_defaults_are_the_8_gpu_record():
    args = Hyperparameters()
    assert args.num_iterations == 1619  # the record's 1695, fewer with NorMuon, backout, cooldown (see records/)
    assert args.train_seq_len == 48 * 1024 == 49152
    assert args.val_seq_len == 4 * 64 * 1024
    assert args.val_tokens == 10_485_760
    assert args.val_loss_every == 125
    assert args.grad_accum_steps == 0  # resolved to 8 // world_size at launch
    assert (args.model_dim, args.num_layers, args.num_heads, args.head_dim) == (768, 12, 6, 128)
    assert args.mlp_ratio == 4
    assert args.vocab_size == 50257
    assert args.no_attention_layer == 7
    assert args.backout_layer == 8
    assert args.window_pattern == "LSSSLSSLSSSL"
    assert (args.window_start, args.window_end) == (0, 1728)  # 1 block -> 14 blocks (1792 tokens)
    assert (args.cooldown_frac, args.final_lr_frac) == (0.55, 0.1)
    assert args.fp8_mlp and args.fp8_amax_row_step == 16
    assert (args.muon_lr, args.muon_momentum, args.muon_momentum_start) == (0.05, 0.95, 0.85)
    assert args.muon_momentum_warmup_steps == 300
    assert args.muon_weight_decay == 0.0
    assert (args.adam_lr, args.adam_beta1, args.adam_beta2, args.adam_eps) == (0.008, 0.8, 0.95, 1e-10)
    assert (args.embed_lr_mult, args.value_embed_lr_mult, args.scalar_lr_mult, args.head_lr_mult) == (75, 75, 5, 1)
    assert args.device == "cuda" and args.compile is True and args.check_only is False
    assert args.fp8_qkv is True and args.smear is False
    assert (args.warmup_steps, args.profile_steps, args.seed, args.peak_tflops) == (10, 0, 0, 989.0)


def test_no_arguments_give_the_defaults():
    assert parse_args([]) == Hyperparameters()


def test_overrides_of_every_kind_are_parsed_to_the_field_type():
    args = parse_args(["--num_iterations=20", "--muon_lr=0.02", "--adam_eps=1e-8", "--compile=false",
                       "--check_only=True", "--window_pattern=LSSSSL", "--run_id=my run",
                       "--train_files=/tmp/a=b/*.bin"])
    assert args.num_iterations == 20 and type(args.num_iterations) is int
    assert args.muon_lr == 0.02 and type(args.muon_lr) is float
    assert args.adam_eps == 1e-8
    assert args.compile is False and args.check_only is True
    assert args.window_pattern == "LSSSSL"
    assert args.run_id == "my run"
    assert args.train_files == "/tmp/a=b/*.bin"  # only the first '=' separates name and value
    assert args.model_dim == 768  # untouched fields keep their defaults


def test_a_float_field_accepts_an_integer_and_the_last_override_wins():
    args = parse_args(["--muon_lr=1", "--num_iterations=5", "--num_iterations=7"])
    assert args.muon_lr == 1.0 and type(args.muon_lr) is float
    assert args.num_iterations == 7


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("raw, expected", [("true", True), ("1", True), ("yes", True), ("TRUE", True),
                                           ("false", False), ("0", False), ("no", False), ("False", False),
                                           ("No", False)])
def test_boolean_spellings(script, raw, expected):
    assert script.parse_args([f"--compile={raw}"]).compile is expected


@pytest.mark.parametrize("script, iterations, window_pattern", [(train_gpt, 1619, "LSSSLSSLSSSL"),
                                                                (train_gpt_medium, 6450, "LSSSLSSSSSSLSSSL")],
                         ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("flag", ["--help", "-h", "--help=1", "--help=true", "--help=false"])
def test_help_lists_every_field_with_its_default(capsys, script, iterations, window_pattern, flag):
    """--help=1 and --help=true too: they were 'unknown setting --help', where the user surely asked for help. And
    --help=false: --help takes no value, so its value is not read; read as --compile=false is, it would start the
    run (under run.sh, on every GPU) for a user who typed --help."""
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--num_iterations=3", flag])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: torchrun --standalone --nproc_per_node=N {script.__name__}.py [--name=value ...]")
    for f in dataclasses.fields(script.Hyperparameters):
        lines = [line.strip() for line in out.splitlines() if line.strip().startswith(f"--{f.name}=")]
        assert len(lines) == 1, f.name
        shown = lines[0][len(f"--{f.name}="):]
        assert shown.startswith(script.format_value(f.default) + " "), f.name
        assert shown.endswith(" " + f.metadata["help"]), f.name
    assert "--compile=true " in out and f"--num_iterations={iterations} " in out  # booleans as the parser spells them
    assert f"--window_pattern={window_pattern} " in out


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_help_into_a_closed_pipe_exits_quietly(script):
    """`--help | head -0`: the reader is gone before the list is written; no BrokenPipeError traceback, exit code 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, script, "--help"], cwd=REPO_ROOT, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("argv, message", [
    (["--num_iterationz=5"], "unknown setting --num_iterationz (see --help for the list)"),
    (["--num_iterations"], "malformed argument '--num_iterations': write settings as --name=value (see --help)"),
    (["num_iterations=5"], "malformed argument 'num_iterations=5': write settings as --name=value (see --help)"),
    (["-num_iterations=5"], "malformed argument '-num_iterations=5'"),
    (["--num_iterations=5.5"], "--num_iterations=5.5 is not an integer"),
    (["--num_iterations="], "--num_iterations= is not an integer"),
    (["--muon_lr=fast"], "--muon_lr=fast is not a number"),
    (["--compile=maybe"], "--compile=maybe is not a boolean; use true or false"),
    (["--check_only="], "--check_only= is not a boolean; use true or false"),
    (["--num-iterations=5"], "--num-iterations: setting names are written with underscores, --num_iterations"),
    (["--no-such-setting=5"], "unknown setting --no-such-setting (see --help for the list)"),
])
def test_bad_arguments_raise_one_setup_error(argv, message):
    with pytest.raises(SetupError) as error:
        parse_args(["--model_dim=64", *argv])
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)
    # not chained to a ValueError, so nothing but this message would ever be shown
    assert error.value.__cause__ is None
    assert error.value.__context__ is None or error.value.__suppress_context__


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("arg, shown", [("--num_iterations=5\nx", "--num_iterations='5\\nx'"),
                                        ("--device=cpu\r\ncuda", "--device='cpu\\r\\ncuda'"),
                                        ("--run_id= a\u2028b\n", "--run_id='a\\u2028b'")])
def test_a_value_with_a_line_break_inside_is_one_error_line(script, arg, shown):
    """A value pasted over two lines ($(...) of a command's output, a quoted paste) was read whole: its error ran
    over two lines ('--num_iterations=5' and 'x is not an integer'), and a run id or a path went into the log's
    header as two lines. A line end at the value's end is a space around it, as before."""
    with pytest.raises(script.SetupError) as error:
        script.parse_args(["--model_dim=64", arg])
    assert str(error.value) == f"{shown} holds a line break; give the value on one line"
    assert len(f"error: {error.value}".splitlines()) == 1
    assert script.parse_args(["--num_iterations=5\n", "--run_id=a b\r\n"]).num_iterations == 5


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_values_may_have_spaces_around_them_and_paths_a_leading_tilde(script, monkeypatch):
    """A shell line like --device=cpu<space> (or a quoted value) used to fail for text settings only, where numbers
    passed; --logs_dir=~/logs made a folder named ~ (the shell expands ~ only at a word's start)."""
    monkeypatch.setenv("HOME", "/home/someone")
    args = script.parse_args(["--device= cpu ", "--compile=true ", "--num_iterations= 6", "--run_id=a b ",
                              "--logs_dir=~/logs", "--train_files=~/data/x_train_*.bin", "--val_files=data/~v.bin",
                              "--compile_cache=~/cache.bin"])
    assert (args.device, args.compile, args.num_iterations, args.run_id) == ("cpu", True, 6, "a b")
    assert (args.logs_dir, args.train_files, args.compile_cache) == (
        "/home/someone/logs", "/home/someone/data/x_train_*.bin", "/home/someone/cache.bin")
    assert args.val_files == "data/~v.bin"  # only a leading ~ is the home folder
    assert script.parse_args(["--window_pattern=~LS"]).window_pattern == "~LS"  # and only in a path setting


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("world_size, expected", [(1, 8), (2, 4), (4, 2), (8, 1)])
def test_grad_accum_steps_zero_means_eight_over_world_size(monkeypatch, script, world_size, expected):
    seen = {}

    def fake_check_data(args, ws, grad_accum_steps):
        seen.update(world_size=ws, grad_accum_steps=grad_accum_steps, field=args.grad_accum_steps)
        return [], []

    monkeypatch.setattr(script, "check_data", fake_check_data)
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setattr(sys, "argv", [f"{script.__name__}.py", "--device=cpu", "--check_only=true"])
    script.main()  # check_only returns before any process group or model is made
    assert seen == dict(world_size=world_size, grad_accum_steps=expected, field=expected)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("rank", [0, 1])
def test_check_only_stops_every_rank_after_the_checks_and_rank_0_alone_says_so(monkeypatch, capsys, script, rank):
    def no_run(*args, **kwargs):
        raise AssertionError("--check_only went on into the run")

    monkeypatch.setattr(script, "check_data", lambda args, ws, accum: ([], []))
    monkeypatch.setattr(script, "configure_triton_builds", no_run)  # the first steps after the checks
    monkeypatch.setattr(script, "set_up_device", no_run)
    monkeypatch.setattr(script, "join_processes", no_run)
    for name, value in [("WORLD_SIZE", "2"), ("RANK", str(rank)), ("LOCAL_RANK", str(rank))]:
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", [f"{script.__name__}.py", "--device=cpu", "--check_only=true"])
    script.main()
    assert capsys.readouterr().out == ("ok: settings, data and device checked for world size 2\n" if rank == 0 else "")


def test_explicit_grad_accum_steps_is_kept(monkeypatch):
    seen = {}
    monkeypatch.setattr(train_gpt, "check_data", lambda args, ws, accum: seen.update(accum=accum) or ([], []))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(sys, "argv", ["train_gpt.py", "--device=cpu", "--check_only=true", "--grad_accum_steps=3"])
    train_gpt.main()
    assert seen == dict(accum=3)


# ----------------------------------------------------------------------------------------------
# Optimizer variants prepared for an A/B: off by default, and a wrong name is one error line


def test_optimizer_defaults_are_normuon_with_jordans_coefficients():
    args = Hyperparameters()
    assert (args.ns_coefficients, args.muon_variant, args.normuon_beta2) == ("jordan", "normuon", 0.95)


@pytest.mark.parametrize("ns_coefficients", sorted(train_gpt.NS_COEFFICIENTS))
@pytest.mark.parametrize("muon_variant", ["muon", "normuon"])
def test_every_optimizer_variant_passes_the_checks(ns_coefficients, muon_variant):
    args = parse_args([f"--ns_coefficients={ns_coefficients}", f"--muon_variant={muon_variant}", "--device=cpu"])
    train_gpt.check_settings(args, 8)


@pytest.mark.parametrize("overrides, message", [
    (dict(ns_coefficients="polar"), "--ns_coefficients=polar: use jordan or polar_express"),
    (dict(ns_coefficients="Jordan"), "--ns_coefficients=Jordan: use jordan or polar_express"),
    (dict(muon_variant="adamuon"), "--muon_variant=adamuon: use muon or normuon"),
    (dict(normuon_beta2=1.0), "--normuon_beta2=1.0 must be in [0, 1)"),
    (dict(normuon_beta2=-0.5), "--normuon_beta2=-0.5 must be in [0, 1)"),
])
def test_optimizer_variant_errors_name_the_allowed_values(overrides, message):
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", **overrides), 1)
    assert str(error.value) == message


def test_script_with_an_unknown_muon_variant_prints_one_error_line():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "train_gpt.py"), "--device=cpu", "--muon_variant=nor"],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == "error: --muon_variant=nor: use muon or normuon"


@pytest.mark.parametrize("overrides, message", [
    (dict(warmup_steps=2, profile_steps=2), "--profile_steps=2 must be below --warmup_steps=2 (the first warmup "
                                            "step compiles)"),
    (dict(profile_steps=-1), "--profile_steps=-1 must be >= 0"),
    (dict(fp8_amax_row_step=0), "--fp8_amax_row_step=0 must be positive"),
])
def test_profile_steps_and_fp8_sampling_errors(overrides, message):
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", **overrides), 1)
    assert str(error.value) == message


@pytest.mark.parametrize("overrides, message", [
    (dict(peak_tflops=0.0), "--peak_tflops=0 must be above 0"),
    (dict(adam_lr=-1.0), "--adam_lr=-1.0 must be a finite number >= 0"),
    (dict(muon_lr=float("nan")), "--muon_lr=nan must be a finite number >= 0"),
    (dict(embed_lr_mult=float("inf")), "--embed_lr_mult=inf must be a finite number >= 0"),
    (dict(adam_beta1=2.0), "--adam_beta1=2.0 must be in [0, 1)"),
    (dict(muon_momentum=float("nan")), "--muon_momentum=nan must be in [0, 1)"),
    (dict(cooldown_frac=5.0), "--cooldown_frac=5.0 must be in [0, 1]"),
    (dict(seed=2**63), f"--seed={2**63} must be in [0, 2^63)"),
    (dict(seed=-1), "--seed=-1 must be in [0, 2^63)"),
    (dict(vocab_size=1000), "--vocab_size=1000 must be above the GPT-2 token ids of the shards (up to 50256, end "
                            "of text): at least 50257"),
    (dict(model_dim=64, num_heads=3, head_dim=32), "--num_heads=3 x --head_dim=32 must equal --model_dim=64 (value "
                                                   "embeddings are added to the values)"),
    (dict(window_start=1024, window_end=128), "--window_start=1024 is above --window_end=128; the window grows "
                                              "during the run"),
    (dict(window_end=2**24 + 1), f"--window_end={2**24 + 1} is above {2**24} tokens; a window past the sequence "
                                 "length changes nothing"),
    (dict(no_attention_layer=12), "--no_attention_layer=12: use -1 (none) or a block index from 0 to 11"),
    (dict(no_attention_layer=-7), "--no_attention_layer=-7: use -1 (none) or a block index from 0 to 11"),
    (dict(window_pattern="LSSSLSSLSSSLL"), "--window_pattern=LSSSLSSLSSSLL needs one L or S per block (12 letters)"),
    (dict(final_lr_frac=1.5), "--final_lr_frac=1.5 must be in [0, 1]"),
    (dict(muon_weight_decay=30.0), "Muon's weight decay takes a matrix's weights to zero or past it each step (lr "
                                   "x weight decay = 1.5 >= 1); lower --muon_weight_decay"),
    (dict(muon_lr=0.5, muon_weight_decay=2.0), "Muon's weight decay takes a matrix's weights to zero or past it each "
                                               "step (lr x weight decay = 1 >= 1); lower --muon_weight_decay"),
    (dict(adam_eps=0.0), "--adam_eps=0 must be above 0"),
    (dict(window_start=-128), "--window_start=-128 must be >= 0"),
    (dict(vocab_size=50256), "--vocab_size=50256 must be above the GPT-2 token ids of the shards (up to 50256, end "
                             "of text): at least 50257"),
    (dict(num_iterations=10**20), f"--num_iterations={10**20} must be below 2^31"),
    (dict(train_seq_len=2**31), f"--train_seq_len={2**31} must be below 2^31"),
    (dict(vocab_size=2**40), f"--vocab_size={2**40} must be below 2^31"),
])
def test_numbers_out_of_range_and_shapes_that_do_not_fit(overrides, message):
    """Each passed the checks before and failed after the compile (a shape, a KeyError, a division by zero at the
    first validation) or trained on nonsense."""
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", **overrides), 1)
    assert str(error.value) == message


POSITIVE = ["num_iterations", "train_seq_len", "val_seq_len", "val_tokens", "num_layers", "model_dim", "num_heads",
            "head_dim", "mlp_ratio", "window_end"]


@pytest.mark.parametrize("script, name", [(train_gpt, name) for name in POSITIVE + ["fp8_amax_row_step"]]
                         + [(train_gpt_medium, name) for name in POSITIVE],
                         ids=lambda value: getattr(value, "__name__", value))
def test_each_count_that_must_be_positive_is_one_error_line_at_zero(script, name):
    """Each of check_numbers' positive counts by name, in both scripts: a name left out of that set lets its 0 past
    every check, to fail after the slow compile (a division by zero, an empty validation or window) or train on
    nothing; only --val_tokens, --num_iterations and --fp8_amax_row_step had a case of their own."""
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", **{name: 0}), 1)
    assert str(error.value) == f"--{name}=0 must be positive"


NON_NEGATIVE = ["val_loss_every", "warmup_steps", "profile_steps", "grad_accum_steps", "muon_momentum_warmup_steps",
                "window_start"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("name", NON_NEGATIVE)
def test_each_count_that_may_be_zero_is_one_error_line_below_it(script, name):
    """Each of check_numbers' counts whose 0 means none or the default, by name: a name left out of that set let -1
    through (--grad_accum_steps=-1 ran no micro-step, then crashed in the optimizer; --val_loss_every=-1 validated
    every step; a negative momentum warmup took the momentum past 1); track 2 had a case for --window_start alone,
    track 1 for --profile_steps."""
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", **{name: -1}), 1)
    assert str(error.value) == f"--{name}=-1 must be >= 0"
    script.check_settings(script.Hyperparameters(device="cpu", **{name: 0}), 1)


UNIT_INTERVAL = ["muon_momentum", "muon_momentum_start", "adam_beta1", "adam_beta2"]


@pytest.mark.parametrize("script, name", [(train_gpt, name) for name in UNIT_INTERVAL + ["normuon_beta2"]]
                         + [(train_gpt_medium, name) for name in UNIT_INTERVAL],
                         ids=lambda value: getattr(value, "__name__", value))
def test_each_momentum_and_beta_is_one_error_line_at_1(script, name):
    """Each of check_numbers' rates of [0, 1) by name: at 1 a momentum or an EMA never forgets (a beta2 of 1 leaves
    Adam's second moment at its first step's), and above 1 it grows without bound; only --muon_momentum,
    --adam_beta1 and --normuon_beta2 had a case of their own in track 1, so a name left out of that set passed."""
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", **{name: 1.0}), 1)
    assert str(error.value) == f"--{name}=1.0 must be in [0, 1)"
    script.check_settings(script.Hyperparameters(device="cpu", **{name: 0.0}), 1)


@pytest.mark.parametrize("overrides", [
    dict(cooldown_frac=1.0, final_lr_frac=1.0),  # a cooldown over the whole run; an lr that never decays
    dict(window_start=1024, window_end=1024),  # a fixed window
    dict(window_end=2**24),  # the largest window
    dict(muon_lr=0.5, muon_weight_decay=1.99),  # lr x weight decay just below 1
    dict(val_tokens=2**31 - 2**18, seed=2**62),  # the largest count below 2^31 that the checks take; a large seed
    dict(no_attention_layer=-1, backout_layer=-1),  # every block with attention; no backout
    dict(no_attention_layer=0, backout_layer=11),  # the first block without attention; backout before the last
])
def test_settings_at_the_edges_of_their_ranges_pass(overrides):
    train_gpt.check_settings(Hyperparameters(device="cpu", **overrides), 1)


def test_an_existing_log_a_logs_dir_that_is_a_file_and_an_unreadable_cache_are_errors(tmp_path):
    (tmp_path / "seed0.txt").write_text("an earlier run's log\n")
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", logs_dir=str(tmp_path), run_id="seed0"), 1)
    assert str(error.value) == (f"{tmp_path / 'seed0.txt'} exists (an earlier run's log); pass another --run_id, "
                                "or move that file")
    train_gpt.check_settings(Hyperparameters(device="cpu", logs_dir=str(tmp_path), run_id="seed1"), 1)
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", logs_dir=str(tmp_path / "seed0.txt")), 1)
    assert str(error.value) == (f"--logs_dir={tmp_path / 'seed0.txt'} cannot be written ({tmp_path / 'seed0.txt'} "
                                "is a file); give a writable folder")
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", compile_cache=str(tmp_path)), 1)
    assert str(error.value).startswith(f"--compile_cache={tmp_path} is not a readable file")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("run_id", ["exp/1", "/tmp/abs", "..", ".", "x" * 252, "\u00e9" * 126])
def test_a_run_id_that_is_not_a_file_name_is_one_error_before_the_run(tmp_path, script, run_id):
    """A '/' in it used to pass the check, then fail as 'cannot write the log in --logs_dir' (or write the log outside
    --logs_dir, for an absolute or ../ path); a name too long for the file system failed the same way. The limit is
    in bytes: 126 e-acutes are 126 characters but 252 bytes in UTF-8."""
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(tmp_path), run_id=run_id), 1)
    assert str(error.value) == (f"--run_id={run_id} is not a file name (no '/', at most 251 bytes); the log is "
                                "<--logs_dir>/<run_id>.txt, so put folders in --logs_dir")
    script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(tmp_path), run_id="x" * 251), 1)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_an_empty_logs_dir_is_one_error_before_the_run(script, monkeypatch, tmp_path):
    """--logs_dir= (an unset shell variable: --logs_dir=$LOGS) read as the working folder, and the log landed there;
    the data tools refuse an empty path the same way."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.parse_args(["--device=cpu", "--logs_dir= "]), 1)
    assert str(error.value) == ("--logs_dir is empty (an unset shell variable?); give the folder of the run logs, "
                                "e.g. --logs_dir=logs")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_logs_dir_below_a_folder_without_search_access_is_one_error(script, tmp_path, monkeypatch):
    """A path below a folder that cannot be searched (mode 000) cannot even be looked up: Path.exists raised
    PermissionError, a traceback. Root ignores the bits, so the lookups' and the folder's answers are faked."""
    locked = tmp_path / "locked"
    locked.mkdir()
    stat, access = os.stat, os.access

    def unsearchable(path, *args, **kwargs):
        if locked in Path(path).parents:
            raise PermissionError(13, "Permission denied", str(path))
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", unsearchable)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and access(path, mode))
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(locked / "logs")), 1)
    assert str(error.value) == (f"--logs_dir={locked / 'logs'} cannot be written ({locked} is not writable); give a "
                                "writable folder")


def test_a_logs_dir_below_a_folder_without_write_access_is_one_error(tmp_path, monkeypatch):
    """The permission bits do not bind root (as in CI's containers), so the folder's answer is faked for it too."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and access(path, mode))
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(device="cpu", logs_dir=str(locked / "logs")), 1)
    assert str(error.value) == (f"--logs_dir={locked / 'logs'} cannot be written ({locked} is not writable); give a "
                                "writable folder")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_folder_that_can_be_written_but_not_searched_is_one_error(script, tmp_path, monkeypatch):
    """Mode 0o200: a file cannot be made in a folder without search (x) permission, writable or not, so the log and
    the compile cache would fail after the checks (the cache after the warmup). Root's access is faked."""
    locked = tmp_path / "locked"
    locked.mkdir()
    deny_access(locked, os.X_OK, monkeypatch)
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(locked)), 1)
    assert str(error.value) == (f"--logs_dir={locked} cannot be written ({locked} is not writable); give a writable "
                                "folder")
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", compile_cache=str(locked / "cache.bin")), 1)
    assert str(error.value).startswith(f"--compile_cache={locked / 'cache.bin'} cannot be written after the warmup "
                                       f"({locked} is not writable)")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_compile_cache_file_that_cannot_be_read_is_one_error_naming_it_so(script, tmp_path, monkeypatch):
    """A cache file without read permission passed the check and failed to load as 'could not be loaded (corrupt,
    ...); delete it', a fix that throws away a good cache. Root's access is faked."""
    cache = tmp_path / "cache.bin"
    cache.write_bytes(b"artifacts")
    deny_access(cache, os.R_OK, monkeypatch)
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", compile_cache=str(cache)), 1)
    assert str(error.value) == (f"--compile_cache={cache} is not a readable file; give a file path (written after the "
                                "warmup when missing)")


@pytest.fixture
def a_file(tmp_path) -> Path:
    """A file where a folder is expected, as the parent of a path the run would write."""
    path = tmp_path / "notes.txt"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_a_compile_cache_the_warmup_could_not_write_is_one_error_before_the_run(script_name, a_file, tmp_path,
                                                                                 monkeypatch):
    """The cache is written after the compile and the warmup: a folder that cannot take it (below a file, or without
    write access, even for a cache that exists and loads) is found before them. Root's access is faked."""
    script = __import__(script_name)
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu", compile_cache=str(a_file / "cache.bin")), 1)
    assert str(error.value) == (f"--compile_cache={a_file / 'cache.bin'} cannot be written after the warmup ({a_file} "
                                "is a file); give a path in a writable folder (copy a read-only cache there)")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "cache.bin").write_bytes(b"artifacts")
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: not (Path(path) == locked and mode & os.W_OK) and
                        access(path, mode))
    for cache in [locked / "cache.bin", locked / "more" / "cache.bin"]:
        with pytest.raises(script.SetupError) as error:
            script.check_settings(script.Hyperparameters(device="cpu", compile_cache=str(cache)), 1)
        assert str(error.value) == (f"--compile_cache={cache} cannot be written after the warmup ({locked} is not "
                                    "writable); give a path in a writable folder (copy a read-only cache there)")
    script.check_settings(script.Hyperparameters(device="cpu", compile_cache=str(tmp_path / "new" / "cache.bin")), 1)
    assert not (tmp_path / "new").exists()  # the check creates nothing


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_a_logs_dir_that_cannot_be_written_is_one_error_before_the_run(script_name, a_file, tmp_path):
    """Below a file, the start-up check names it; what it cannot foresee fails in open_log as one error too, not as
    a traceback from the log's first write."""
    script = __import__(script_name)
    for mode in (0o644, 0o755):  # an executable file passes os.access(W_OK | X_OK) as a folder would
        a_file.chmod(mode)
        with pytest.raises(script.SetupError) as error:
            script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(a_file / "logs")), 1)
        assert str(error.value) == (f"--logs_dir={a_file / 'logs'} cannot be written ({a_file} is a file); give a "
                                    "writable folder")
    with pytest.raises(script.SetupError) as error:
        script.open_log(script.Hyperparameters(device="cpu", logs_dir=str(a_file / "logs")), 0, 1)
    assert str(error.value).startswith(f"cannot write the log in --logs_dir={a_file / 'logs'} (")
    assert str(error.value).endswith("); give a writable folder")
    script.check_settings(script.Hyperparameters(device="cpu", logs_dir=str(tmp_path / "new" / "logs")), 1)
    assert not (tmp_path / "new").exists()  # the check creates nothing


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("name, value, message", [
    ("WORLD_SIZE", "0", "world size 0 does not divide 8"), ("WORLD_SIZE", "-1", "world size -1 does not divide 8"),
    ("WORLD_SIZE", "abc", "WORLD_SIZE=abc is not a process count; launch with torchrun or ./run.sh"),
    ("RANK", "x", "RANK=x is not a process rank; launch with torchrun or ./run.sh"),
    ("RANK", "-1", "RANK=-1 is not a process rank; launch with torchrun or ./run.sh"),
    ("LOCAL_RANK", "", "LOCAL_RANK= is not a process rank; launch with torchrun or ./run.sh"),
    ("LOCAL_RANK", "-2", "LOCAL_RANK=-2 is not a process rank; launch with torchrun or ./run.sh"),
])
def test_a_bad_world_size_or_rank_from_the_launcher_is_one_error(monkeypatch, script, name, value, message):
    module = __import__(script)
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--device=cpu", "--check_only=true"])
    with pytest.raises(module.SetupError) as error:
        module.main()
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("env, message", [
    ({"RANK": "1"}, "RANK=1 is not below the world size, 1 (WORLD_SIZE); unset RANK (left in the environment?), or "
                    "launch with ./run.sh or torchrun"),
    ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK=4 is not below the world size, 4 (WORLD_SIZE)"),
    ({"LOCAL_RANK": "1"}, "LOCAL_RANK=1 is above RANK=0; unset LOCAL_RANK (left in the environment?), or launch "
                          "with ./run.sh or torchrun"),
    ({"MASTER_PORT": "abc"}, "MASTER_PORT=abc is not a port (1 to 65535); give a free port, or launch with ./run.sh "
                             "or torchrun --standalone"),
    ({"MASTER_PORT": "99999"}, "MASTER_PORT=99999 is not a port (1 to 65535)"),
    ({"MASTER_PORT": "0"}, "MASTER_PORT=0 is not a port (1 to 65535)"),
    ({"MASTER_PORT": "\u00b2"}, "MASTER_PORT=\u00b2 is not a port (1 to 65535)"),  # str.isdigit's digit, not int's
])
def test_launch_variables_that_do_not_fit_together_are_one_error_that_every_process_prints(monkeypatch, capsys,
                                                                                            script, env, message):
    """A RANK left in a shell used to hide every error (rank 0 alone prints them), then wait for sequences no rank
    dealt it and end in a generator's traceback. A MASTER_PORT that is not a port passed the check and ended in
    torch's ValueError traceback when the group started."""
    module = __import__(script)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--device=cpu", "--check_only=true"])
    with pytest.raises(module.LaunchError) as error:
        module.main()
    assert str(error.value).startswith(message)
    with pytest.raises(SystemExit):
        module.exit_with_setup_error(error.value)
    assert capsys.readouterr().err == f"error: {error.value}\n"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("port, is_port", [("65536", False), ("0", False), ("65535", True), ("1", True)])
def test_master_port_is_checked_at_both_ends_of_the_port_range(monkeypatch, script, port, is_port):
    """1 to 65535, both ends included: the cases above stop at 0 and 99999, so an off-by-one at either end (65536
    let through to torch's ValueError traceback when the group starts, or port 1 or 65535 refused) went unseen."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_PORT", port)
    if is_port:
        assert script.launch_ranks() == (1, 0, 0)
        return
    with pytest.raises(script.LaunchError) as error:
        script.launch_ranks()
    assert str(error.value) == (f"MASTER_PORT={port} is not a port (1 to 65535); give a free port, or launch with "
                                "./run.sh or torchrun --standalone")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("missing", ["RANK", "MASTER_ADDR", "MASTER_PORT"])
def test_several_processes_without_each_of_torchruns_meeting_variables_is_one_launch_error(monkeypatch, script,
                                                                                           missing):
    """Each of the three, by name: the end-to-end test leaves out MASTER_PORT only, so a check without RANK (which
    launch_ranks reads as 0) passed it, and the group's start would raise torch's ValueError, a traceback."""
    launch = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(missing)
    with pytest.raises(script.LaunchError) as error:
        script.join_processes(torch.device("cpu"), int(os.environ.get("RANK", "0")), 2)
    assert str(error.value) == (f"WORLD_SIZE=2 without {missing}, which torchrun sets for the processes to meet; "
                                "launch with ./run.sh or torchrun, or unset WORLD_SIZE for one process")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("device, backend", [("cpu", "gloo"), ("cuda:1", "nccl")])
def test_several_processes_join_one_group_and_each_keeps_its_own_rank(monkeypatch, script, device, backend):
    """Rank 1 of 2: the group on NCCL for GPUs (bound to the rank's GPU) or gloo on the CPU, and a Comm of this rank
    and world size, which the optimizers shard their work by; one process joins no group."""
    joined = []
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(script.dist, "init_process_group", lambda **kwargs: joined.append(kwargs))
    comm = script.join_processes(torch.device(device), 1, 2)
    assert (comm.rank, comm.world_size) == (1, 2)
    assert joined == [dict(backend=backend, **({"device_id": torch.device(device)} if backend == "nccl" else {}))]
    comm = script.join_processes(torch.device(device), 0, 1)
    assert (comm.rank, comm.world_size, len(joined)) == (0, 1, 1)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_launch_variables_with_spaces_around_them_are_read_as_torch_reads_them(monkeypatch, script):
    """int() takes " 2 " (torch's env:// rendezvous reads WORLD_SIZE, RANK and MASTER_PORT so), and so do the checks,
    as --name=value settings may have spaces around them: a check of the unstripped text would refuse a launch that
    torch runs."""
    for name, value in {"WORLD_SIZE": " 2", "RANK": "1 ", "LOCAL_RANK": " 1 ", "MASTER_PORT": " 29500 "}.items():
        monkeypatch.setenv(name, value)
    assert script.launch_ranks() == (2, 1, 1)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_ranks_that_fit_together_are_read_as_torchrun_sets_them(monkeypatch, script):
    launch = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "MASTER_PORT": "29500"}  # the second of 4 nodes
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    assert script.launch_ranks() == (8, 5, 1)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name)
    assert script.launch_ranks() == (1, 0, 0)


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("version, world_size, grad_accum_steps, notes", [
    ("2.11.0", 8, 1, []), ("2.14.1+cu130", 1, 8, []), ("2.11.0", 2, 4, []),
    ("2.11.0", 2, 1, ["note: a global batch of 2 process(es) x 1 micro-step(s), not the 8-GPU record's 8: its losses "
                      "do not compare with the record's"]),
    ("2.11.0", 8, 2, ["note: a global batch of 8 process(es) x 2 micro-step(s), not the 8-GPU record's 8: its losses "
                      "do not compare with the record's"]),  # a larger batch than the record's, too
    ("2.10.0+cu128", 8, 1, ["note: torch 2.10.0+cu128 is older than 2.11, the oldest this script was tested on; if it "
                            "fails, pip install -r requirements.txt"]),
    ("2.11.0a0+git1234", 1, 1, [
        "note: a global batch of 1 process(es) x 1 micro-step(s), not the 8-GPU record's 8: its losses do not compare "
        "with the record's",
        "note: torch 2.11.0a0+git1234 is older than 2.11, the oldest this script was tested on; if it fails, pip "
        "install -r requirements.txt"]),
])
def test_a_setup_unlike_the_records_gets_a_note_line_each(monkeypatch, script, version, world_size, grad_accum_steps,
                                                          notes):
    """A global batch other than 8 micro-steps, or a torch older than the one the script ran on: the run goes on,
    and the log says so (torch 2.9.1 trained the tiny CPU model, compiled or not; its GPU path was never run)."""
    module = __import__(script)
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion(version))
    args = module.Hyperparameters(device="cpu", grad_accum_steps=grad_accum_steps)
    assert module.setup_notes(args, world_size) == notes


def fake_gpu(monkeypatch, capability, rowwise_fp8: bool = True):
    """One GPU of this compute capability, whose torch does (or does not) run a rowwise-scaled FP8 matmul."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(train_gpt, "rowwise_fp8_matmul_runs", lambda: rowwise_fp8)


@pytest.mark.parametrize("capability, message", [
    ((8, 0), "the FP8 head and MLP need FP8 tensor cores, on sm_89 or newer (this GPU is sm_80); run on an H100, "
             "H200, L4 or newer, or track 2 (train_gpt_medium.py), which is bf16 (sm_80 or newer)"),
    ((8, 9), None), ((9, 0), None),
])
def test_a_gpu_without_fp8_tensor_cores_is_one_error_line(monkeypatch, capability, message):
    fake_gpu(monkeypatch, capability, rowwise_fp8=message is None)  # an sm_80 runs no FP8 matmul, its message first
    if message is None:
        train_gpt.check_settings(Hyperparameters(), 1)
        return
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(), 1)
    assert str(error.value) == message


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_more_processes_on_a_node_than_gpus_is_one_error_line(monkeypatch, script):
    fake_gpu(monkeypatch, (9, 0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value) == "2 processes per node, more than the GPUs on it (1); launch one process per GPU"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # two nodes of one GPU each
    script.check_settings(script.Hyperparameters(), 2)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("local_processes", ["0", "-1", "3"])
def test_a_local_world_size_outside_one_to_the_world_size_is_one_error_line(monkeypatch, script, local_processes):
    """0 or below used to pass, and turn off the check of processes against GPUs."""
    fake_gpu(monkeypatch, (9, 0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local_processes)
    with pytest.raises(script.LaunchError) as error:
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value) == (f"LOCAL_WORLD_SIZE={local_processes} is not a process count from 1 to the world "
                                "size, 2; unset LOCAL_WORLD_SIZE (left in the environment?), or launch with ./run.sh "
                                "or torchrun")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("local_rank", ["2", "5"])
def test_a_local_rank_not_below_the_local_world_size_is_one_error_line_before_the_gpu_is_touched(monkeypatch, script,
                                                                                                  local_rank):
    """It used to pass on a node with GPUs to spare: LOCAL_RANK=5 of 2 processes per node read GPU 5's capability
    and ran the FP8 probe there, and the run went on with the ranks' GPUs and data out of step."""
    touched = []
    fake_gpu(monkeypatch, None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: touched.append(device) or (9, 0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    for device in ("cuda", "cpu"):
        with pytest.raises(script.LaunchError) as error:
            script.check_settings(script.Hyperparameters(device=device), 4)
        assert str(error.value) == (f"LOCAL_RANK={local_rank} is not below the processes per node, 2 "
                                    "(LOCAL_WORLD_SIZE); unset LOCAL_RANK (left in the environment?), or launch with "
                                    "./run.sh or torchrun")
    assert touched == []
    monkeypatch.setenv("LOCAL_RANK", "1")
    script.check_settings(script.Hyperparameters(), 4)
    assert touched == [1]


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
def test_a_local_rank_past_the_local_world_size_is_printed_by_its_own_process(monkeypatch, capsys, script):
    """A launch error, so the process that has it prints it whatever its rank (rank 0's check may pass); a hand
    launch that sets no LOCAL_WORLD_SIZE names no count to check against, and goes on as before."""
    module = __import__(script)
    monkeypatch.setattr(module, "check_data", lambda args, ws, accum: ([], []))
    for name, value in [("WORLD_SIZE", "4"), ("RANK", "3"), ("LOCAL_RANK", "3"), ("LOCAL_WORLD_SIZE", "2")]:
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--device=cpu", "--check_only=true"])
    with pytest.raises(module.LaunchError) as error:
        module.main()
    with pytest.raises(SystemExit):
        module.exit_with_setup_error(error.value)
    assert capsys.readouterr().err == ("error: LOCAL_RANK=3 is not below the processes per node, 2 (LOCAL_WORLD_SIZE); "
                                       "unset LOCAL_RANK (left in the environment?), or launch with ./run.sh or "
                                       "torchrun\n")
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    module.main()
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("script, message", [
    (train_gpt, "the FP8 head and MLP need FP8 tensor cores, on sm_89 or newer (this GPU is sm_80); run on an H100, "
                "H200, L4 or newer, or track 2 (train_gpt_medium.py), which is bf16 (sm_80 or newer)"),
    (train_gpt_medium, "--mlp_epilogue needs TMA, on sm_90 or newer (this GPU is sm_80); pass --mlp_epilogue=false"),
], ids=["train_gpt", "train_gpt_medium"])
def test_the_gpu_check_reads_the_local_ranks_gpu_not_the_first(monkeypatch, script, message):
    """The check runs before set_device, when torch's current GPU is the first whatever the rank."""
    capabilities = [(9, 0), (8, 0)]
    fake_gpu(monkeypatch, None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capabilities[device])
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    script.check_settings(script.Hyperparameters(), 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value) == message


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_local_rank_past_the_gpus_is_one_error_line(monkeypatch, script):
    """It used to fail as 'invalid device ordinal' from the FP8 probe or set_device, a traceback."""
    fake_gpu(monkeypatch, (9, 0))
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(script.LaunchError) as error:  # printed by the process that has it, whatever its rank
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value) == ("LOCAL_RANK=1, but this machine shows 1 GPU(s) (CUDA_VISIBLE_DEVICES=3); launch one "
                                "process per GPU")
    monkeypatch.setenv("LOCAL_RANK", "0")
    script.check_settings(script.Hyperparameters(), 2)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_gpu_checks_name_the_node_then_the_ranks_gpu_before_asking_what_it_can_do(monkeypatch, script):
    """check_gpu's order: too many processes for the node's GPUs is the problem where a rank's GPU is missing too,
    and a missing GPU is named before its capability is asked (torch raises for a GPU that is not there)."""
    def capability(device=None):
        if device >= torch.cuda.device_count():
            raise AssertionError("Invalid device id")
        return (8, 0)

    fake_gpu(monkeypatch, None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value) == "2 processes per node, more than the GPUs on it (1); launch one process per GPU"
    monkeypatch.delenv("LOCAL_WORLD_SIZE")  # a hand launch: LOCAL_RANK=1 on a machine of one GPU
    with pytest.raises(script.LaunchError) as error:
        script.check_settings(script.Hyperparameters(), 2)
    assert str(error.value).startswith("LOCAL_RANK=1, but this machine shows 1 GPU(s) ")


def test_a_gpu_without_rowwise_fp8_matmuls_is_one_error_line_unless_the_qkv_projection_stays_bf16(monkeypatch):
    fake_gpu(monkeypatch, (10, 0), rowwise_fp8=False)
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(), 1)
    assert str(error.value) == ("this GPU and torch build have no rowwise-scaled FP8 matmul, which the QKV "
                                "projection uses; pass --fp8_qkv=false")
    train_gpt.check_settings(Hyperparameters(fp8_qkv=False), 1)


def test_the_rowwise_fp8_probe_answers_false_where_the_matmul_raises_and_runs_on_the_ranks_gpu(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("rowwise scaling is not supported on this device")

    devices = []
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(train_gpt, "rowwise_scaled_mm", refuse)
    monkeypatch.setattr(torch, "ones", lambda *shape, device: devices.append(device) or torch.zeros(*shape))  # no GPU
    assert train_gpt.rowwise_fp8_matmul_runs() is False
    monkeypatch.setattr(train_gpt, "rowwise_scaled_mm", lambda *args: None)
    assert train_gpt.rowwise_fp8_matmul_runs() is True
    assert devices == [torch.device("cuda", 3)] * 4


def test_a_model_width_the_fp8_tensor_cores_cannot_take_is_one_error_line(monkeypatch):
    """torch._scaled_mm takes matrices whose sizes are multiples of 16; 6 heads of 68 passed every other check."""
    fake_gpu(monkeypatch, (9, 0))
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(num_heads=6, head_dim=68, model_dim=408), 1)
    assert str(error.value) == ("--model_dim=408 must be a multiple of 16 on the GPU (the FP8 tensor cores' matrix "
                                "sizes); change --num_heads or --head_dim")
    train_gpt.check_settings(Hyperparameters(num_heads=6, head_dim=68, model_dim=408, device="cpu"), 1)  # emulated


def test_window_tensors_are_made_for_the_windows_the_run_uses():
    """A window per block count that a warmup step, a training step or the warmup's validation (1 block) uses: a
    window_end of millions of tokens made one tensor per block up to it (7.8M tensors, 57 s of start-up)."""
    args = Hyperparameters(num_iterations=4, warmup_steps=6, window_start=512, window_end=2**24, device="cpu")
    windows = train_gpt.window_tensors(args, torch.device("cpu"))
    expected = {1} | {train_gpt.window_blocks_at(step, args) for step in range(7)}
    assert sorted(windows) == sorted(expected) and len(windows) == 6
    assert all(tensor.item() == w and tensor.dtype == torch.int32 for w, tensor in windows.items())
    default = train_gpt.window_tensors(Hyperparameters(device="cpu"), torch.device("cpu"))
    assert sorted(default) == list(range(1, 15))  # the record's 1 -> 14 blocks, every one used
