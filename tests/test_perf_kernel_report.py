"""perf/kernel_report.py: the tracks' Triton kernels compiled for sm_90 on this (GPU-less) machine, and the
properties their speed rests on. It runs in a subprocess: it needs Triton's GPU compiler, while the other tests
import the scripts under Triton's interpreter (TRITON_INTERPRET=1, tests/conftest.py). Its command line's errors are
one line each, checked before a script loads (a subprocess of a fraction of a second)."""

import re

import pytest


def run_report(run_gpu_compiler, *args):
    result = run_gpu_compiler("perf/kernel_report.py", *args)
    assert result.returncode == 0, result.stderr
    lines = {}
    for line in result.stdout.splitlines():
        match = re.match(r"(\w+) \[.*\]: (\d+) registers, (\d+) B spilled, (\d+) B shared, widest load (\d+) B / "
                         r"store (\d+) B, (\d+) bf16->fp32 conversions a thread, (\d+) special-function ops a thread, "
                         r"L2 hints: ([^;]+);", line)
        assert match, line
        loops = [(int(issue), int(mufu)) for issue, mufu in re.findall(r"(\d+) issue / (\d+) MUFU cycles", line)]
        lines[match[1]] = [int(value) for value in match.groups()[1:-1]] + [match[9], loops]
    return lines


@pytest.fixture(scope="module")
def report(run_gpu_compiler):
    return run_report(run_gpu_compiler)


def launched_kernels(repo_root, script: str) -> set[str]:
    """The script's Triton kernels: the @triton.jit functions named ..._kernel (the others are their helpers)."""
    source = (repo_root / script).read_text()
    return set(re.findall(r"^@triton\.jit\b.*\ndef (\w+_kernel)\(", source, flags=re.M))


def test_track_2s_head_kernel_takes_half_its_first_pass_exps_off_the_special_function_unit(run_gpu_compiler,
                                                                                             repo_root):
    """Track 2's kernel (8 entries a thread a loop iteration): the first pass takes 8 rsqrt and 4 ex2 on the unit
    (the other 4 exps on the FMA units), 96 cycles a warp; the second 8 and 8, 128."""
    lines = run_report(run_gpu_compiler, "train_gpt_medium.py")
    assert set(lines) == launched_kernels(repo_root, "train_gpt_medium.py")
    assert len(lines) == 5
    assert [mufu for _, mufu in lines["softcap_ce_kernel"][-1]] == [96, 128]


def test_track_2s_mlp_gemm_launches_fit_in_shared_memory_and_only_the_backward_takes_square_roots(run_gpu_compiler):
    """The MLP GEMM at a 4-stage 128 x 256 launch: the forward fits, the backward not (its TMA stages, 48 KB each, and
    two half-tile buffers); two programs of 128 x 128 tiles at 3 stages fit an SM in the forward, not in the backward
    (a's buffer). The backward's relu(h) = sqrt(a): one special-function op per element (128 a thread at 128 x 256
    tiles and 8 warps), none in the forward."""
    result = run_gpu_compiler("perf/kernel_report.py", "train_gpt_medium.py", "--launch=128,256,64,8,8,4,1,1",
                              "--launch=128,128,64,8,8,3,1,2")
    assert result.returncode == 0, result.stderr
    gemm = [line for line in result.stdout.splitlines() if line.startswith("relu_square_gemm_kernel")]
    assert len(gemm) == 4  # --launch replaces MLP_LAUNCH: forward, then backward, each launch
    forward, forward_two, backward, backward_two = gemm
    assert "BACKWARD=False" in forward_two and "BACKWARD=True" in backward
    assert "; fits in 232448 B; 1 an SM fit" in forward and "; does not fit in 232448 B; 1 an SM do not fit" in backward
    assert "; 2 an SM fit" in forward_two and "; 2 an SM do not fit" in backward_two
    special = [int(re.search(r"(\d+) special-function ops", line)[1]) for line in (forward, backward)]
    assert special == [0, 128]
    default = run_report(run_gpu_compiler, "train_gpt_medium.py")
    assert default["relu_square_gemm_kernel"][2] <= 232_448  # shared bytes of the last line, the backward


def test_every_kernel_of_track_1_is_reported(report, repo_root):
    assert set(report) == launched_kernels(repo_root, "train_gpt.py")
    assert len(report) == 14


SMALL_KERNELS = {"column_sums_kernel", "gate_logits_kernel", "gate_logits_backward_kernel"}


def test_no_kernel_spills_registers_and_all_move_16_bytes_at_a_time(report):
    """The up projection's GEMM moves its tiles by TMA (cp.async.bulk.tensor), which the widest load does not count:
    its loads are its scales. SMALL_KERNELS read rows of 2, 6, 12 or 72 entries (a few MB a call, a few us: their
    launch, not their loads' width, sets their time)."""
    for name, (registers, spilled, shared, widest_load, widest_store, *_) in report.items():
        assert 0 < registers <= 255 and spilled == 0, name
        if name not in SMALL_KERNELS:
            assert widest_load == (4 if name == "relu_square_up_kernel" else 16), name


def test_up_projections_gemm_fits_in_shared_memory_and_divides_by_as_scale_once(report):
    """Four TMA stages of 128 x 128 and 256 x 128 e4m3 tiles (48 KB each) and the epilogue's whole 128 x 256 tile
    fit an sm_90 block, just (229,408 of 232,448 B). The epilogue multiplies by a's scale's reciprocal, one
    special-function op a program (a division an entry was 128 a thread and 255 registers)."""
    registers, _, shared, _, _, _, special, _, _ = report["relu_square_up_kernel"]
    assert 4 * 48 * 1024 + 32 * 1024 <= shared <= 232_448 and special == 1 and registers < 200


def test_up_projections_gemm_runs_on_the_fp8_tensor_cores_and_keeps_a_nan(run_gpu_compiler):
    """Its PTX: wgmma on e4m3 operands, the saturating e4m3 cast, and relu's max and the clamp's min that keep a NaN
    (the interpreter's maximum and minimum keep it either way, so the CPU tests cannot tell)."""
    ops = "wgmma[.]mma_async[.][.a-z0-9]*|cvt[.][.a-z0-9]*e4m3[.a-z0-9]*|(?:max|min)[.][.A-Za-z]*f32"
    code = ("import re, sys; sys.path.insert(0, 'perf'); import kernel_report as kr; from track_scripts import ROOT, "
            "load_script; script = load_script(ROOT / 'train_gpt.py'); constexprs, warps, types, stages = "
            "kr.RELU_SQUARE_UP[0]; ptx = kr.compile_kernel(script.relu_square_up_kernel, constexprs, warps, stages, "
            "types).asm['ptx']; "
            f"print(sorted(set(re.findall('{ops}', ptx))))")
    result = run_gpu_compiler("-c", code)
    assert result.returncode == 0, result.stderr
    assert eval(result.stdout) == ["cvt.rn.satfinite.e4m3x2.f32", "max.NaN.f32", "min.NaN.f32",
                                   "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"]


def test_cross_entropy_kernel_converts_each_element_once_a_pass_and_stores_16_bytes(report):
    """8192 elements a block over 512 threads, two passes over the row: 2 x 16 conversions a thread and one for the
    target. More would mean Triton computes blocks twice (the first fused backward did, once per store layout)."""
    registers, _, shared, _, widest_store, conversions, _, _, _ = report["softcap_ce_kernel"]
    assert conversions == 33 and shared <= 64  # the row sum's scratch only
    assert registers <= 64  # 16 warps a block, two blocks an SM
    assert widest_store == 16


def test_cross_entropy_kernel_keeps_the_row_in_l2_for_its_second_pass(report):
    """The first pass's loads (a block's two halves, 8 entries a thread each: one 16-byte load) ask L2 to keep the row
    (evict_last); the second pass's loads (16 entries a thread: two 16-byte loads) and the gradient's store, to
    drop theirs first (evict_first). Every other kernel streams its data once and carries no hint."""
    assert report["softcap_ce_kernel"][7] == "2 ld evict_first, 2 ld evict_last, 1 st evict_first"
    assert all(line[7] == "none" for name, line in report.items() if name != "softcap_ce_kernel")


def test_cross_entropy_kernel_takes_the_special_function_ops_it_needs(report):
    """The kernel is bound by the special-function units (a quarter of the FP32 rate): each element's capped logit
    is one tanh.approx in each of the two passes, its exp one ex2 in half of the first pass and three quarters of
    the second (the others on the FMA units), plus the target's tanh: (2 + 0.5 + 0.75) x 16 + 1 a thread. With every
    exp of the second pass on the unit it was 57; through tl.sigmoid, 3 an element a pass (exp, reciprocal, exp): 98."""
    assert report["softcap_ce_kernel"][6] == (2 + 0.5 + 0.75) * 16 + 1


def test_cross_entropy_kernel_loops_wait_on_the_special_function_unit_alone(report):
    """Its two passes over the row are two loops of 16 entries a thread. Each waits on the special-function unit
    (8 cycles a warp an op) and issues no more instructions than that: the first pass 24 ops (192 cycles; 256 with
    all its exps on the unit), the second 28 (224; 256 with all its exps on the unit, at 195 issue cycles). Each exp
    moved to the FMA units takes ~8 issue cycles for 8 of the unit's: the second pass's gradient arithmetic leaves
    room for a quarter of its exps (and their clamp at -125), which brings its issue cycles level with the unit's.
    Before the exps became ex2.approx.ftz with their constants folded, the second pass issued 360 instructions (and
    the first 202), so its arithmetic set its pace. The L2 hints' policy instructions add 6 issue cycles to each loop
    (192 and 230, from 186 and 224): the second pass then issues less than one special-function op's 8 cycles above
    the unit's, a cost its rereads from L2 instead of HBM repay."""
    loops = report["softcap_ce_kernel"][-1]
    assert [mufu for _, mufu in loops] == [192, 224]
    first, second = loops
    assert first[0] <= first[1] and second[0] < second[1] + 8, loops


def test_attention_inputs_kernels_read_each_element_once(report):
    """16 rows of 128 a block over 128 threads: q, k, v and the value embedding, 16 elements each a thread, converted
    once (64); the backward (training's, with the rowwise e4m3 gradient: the last line) reads the three incoming
    gradients, q, k, v and the value embedding, each once (112), and takes qkv's gradient back from bf16 once for
    the float8 cast (48)."""
    assert report["attention_inputs_kernel"][5] == 64
    assert report["attention_inputs_backward_kernel"][5] == 112 + 48


def test_relu_square_kernel_reads_float8_only(report):
    """32 x 128 entries a block over 128 threads: a in e4m3 and a's gradient in e5m2, so no bf16 input is converted
    (32 a thread when the gradient came in bf16, 96 when the kernel read h in bf16), and both transposed float8
    stores swap their layout through one 32 x 128 byte block of shared memory (8 KB when the kernel rounded
    relu(h)^2 again). Each entry takes relu(h) = sqrt(a) by the approximate square root and one division by the
    gradient's scale. The correctly rounded root (sqrt.rn: a MUFU.RSQ, Newton steps and a called slow path for zeros)
    took 72 registers to the approximate one's 56 with the bf16 gradient, and 395 us a call against 337 on an H100
    (session 65)."""
    registers, _, shared, _, _, conversions, special, _, _ = report["relu_square_grads_kernel"]
    assert conversions == 0 and shared == 32 * 128 and special == 2 * 32 and registers < 64


def one_error_line(result) -> str:
    assert result.returncode == 2 and result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr.strip()


def test_help_prints_the_usage_and_an_unknown_argument_is_one_line_without_compiling(run_gpu_compiler):
    result = run_gpu_compiler("perf/kernel_report.py", "train_gpt_medium.py", "--help", timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    usage = "python perf/kernel_report.py [path/to/train_gpt.py | path/to/train_gpt_medium.py] [--launch=...]  ->"
    assert usage in result.stdout
    for bad in ("--bogus", "--launch"):  # were ignored after a path, and alone taken as one: an import traceback
        result = run_gpu_compiler("perf/kernel_report.py", "train_gpt_medium.py", bad, timeout=60)
        assert one_error_line(result) == (f"error: unknown argument {bad!r}: its only options are --launch=... (see "
                                          "--help)")
    result = run_gpu_compiler("perf/kernel_report.py", "train_gpt.py", "train_gpt_medium.py", timeout=60)
    assert one_error_line(result) == ("error: unknown argument 'train_gpt_medium.py': its only options are "
                                      "--launch=... (see --help)")


def test_a_missing_script_or_another_name_is_one_line(run_gpu_compiler, tmp_path):
    result = run_gpu_compiler("perf/kernel_report.py", f"{tmp_path}/train_gpt.py", timeout=60)
    assert one_error_line(result) == (f"error: {tmp_path}/train_gpt.py: no such file; give train_gpt.py or "
                                      "train_gpt_medium.py, or a copy keeping its name (see --help)")
    (tmp_path / "copy.py").write_text("")  # was a KeyError after the copy's import
    result = run_gpu_compiler("perf/kernel_report.py", f"{tmp_path}/copy.py", timeout=60)
    assert one_error_line(result) == (f"error: {tmp_path}/copy.py: the report knows the kernels of train_gpt.py and "
                                      "train_gpt_medium.py only; give one of them, or a copy keeping its name (see "
                                      "--help)")


@pytest.mark.parametrize("launch", ["128,256,64,8,8,4,1", "128,256,64,8,8,4,1,x", "128,256,64,8,8,4,1,1,"])
def test_a_launch_that_is_not_8_integers_is_one_line(run_gpu_compiler, launch):
    """Was a ValueError: at int(), or at the launch's unpacking after the other kernels had compiled."""
    result = run_gpu_compiler("perf/kernel_report.py", "train_gpt_medium.py", "--launch=128,256,64,8,8,4,1,1",
                              f"--launch={launch}", timeout=60)
    assert one_error_line(result) == (f"error: --launch={launch}: give 8 comma-separated integers, BLOCK_M,BLOCK_N,"
                                      "BLOCK_K,GROUP_M,WARPS,STAGES,SPLIT,PROGRAMS_PER_SM (see --help)")


def test_a_launch_for_track_1_is_one_line(run_gpu_compiler):
    """Was ignored: --launch sets track 2's MLP GEMM, and track 1 has none."""
    result = run_gpu_compiler("perf/kernel_report.py", "--launch=128,256,64,8,8,4,1,1", timeout=60)
    assert one_error_line(result) == ("error: --launch sets track 2's MLP GEMM, which train_gpt.py does not have; give "
                                      "train_gpt_medium.py with it (see --help)")
