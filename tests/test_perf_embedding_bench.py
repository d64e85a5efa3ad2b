"""perf/embedding_bench.py on small shapes on the CPU (--tiny, the kernels under Triton's interpreter): every way of
the four tables' backward is timed and checked against the fp32 sums, every add_rows_kernel launch among them and
sorted_add_rows_kernel at its tiny launch, and the hand-over is timed (the GPU numbers come from the device). Run in
this process, so that the interpreter fixture's patch applies."""

import re
import sys

import torch


def test_tiny_run_times_every_backward_and_the_fp32_ways_sum_within_one_rounding(repo_root, require_interpreted,
                                                                                capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    tg = embedding_bench.load_script(embedding_bench.ROOT / "train_gpt.py")
    require_interpreted(tg.add_rows_kernel)
    assert embedding_bench.main(["--tiny"]) == 0
    header, *lines, hand_over = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"512 ids, \d+ distinct, the most frequent \d+ times", header), header
    assert re.fullmatch(r"hand-over \(GPT.take_table_grads\) of 4 tables' sums: [\d.]+ ms a step", hand_over), hand_over
    errors, launches, sorted_launches = {}, [], []
    for line in lines:
        match = re.fullmatch(r"(eager|compiled|add_rows_kernel|sorted_add_rows_kernel)( \(.+\)| BLOCK_TOKENS=(\d+) "
                             r"BLOCK_COLS=(\d+) warps=(\d+)( \(the script's\)| \(with the ids' sort\))?): [\d.]+ ms "
                             r"for 4 tables, largest gradient error ([\d.e+-]+) of the largest entry", line)
        assert match, line
        errors.setdefault(match[1], []).append(float(match[7]))
        if match[1] == "add_rows_kernel":
            launches.append(((int(match[3]), int(match[4]), int(match[5])), match[6] == " (the script's)"))
        if match[1] == "sorted_add_rows_kernel":
            assert match[6] == " (with the ids' sort)"
            sorted_launches.append((int(match[3]), int(match[4]), int(match[5])))
    assert set(errors) == {"eager", "compiled", "add_rows_kernel", "sorted_add_rows_kernel"}
    assert [launch for launch, _ in launches] == embedding_bench.ADD_ROWS_LAUNCHES
    assert sorted_launches == embedding_bench.TINY_SORTED_LAUNCHES
    assert [marked for _, marked in launches] == [launch == tg.ADD_ROWS_LAUNCH for launch, _ in launches]
    assert launches[0] == (tg.ADD_ROWS_LAUNCH, True)
    # inductor sums each entry in fp32, then rounds once to bf16; the CPU's eager backward sums in bf16, a looser
    # bound; add_rows_kernel's sums stay fp32 (only the adds' order differs)
    assert 0 < errors["compiled"][0] <= 2 ** -8 and errors["eager"][0] < 0.05
    assert all(error < 1e-6 for error in errors["add_rows_kernel"] + errors["sorted_add_rows_kernel"]), errors


def test_sorted_add_rows_kernel_sums_runs_of_one_id_across_blocks(repo_root, require_interpreted):
    """Ids in runs longer than a block, runs that start and end inside one, a last partial block and columns past the
    width: every row of sums is its ids' rows added to what it held, as index_add_ gives."""
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    require_interpreted(embedding_bench.sorted_add_rows_kernel)
    gen = torch.Generator().manual_seed(3)
    ids = torch.tensor([5] * 40 + [2] * 3 + [7] + [5] * 2 + [0] * 20 + [9] * 5, dtype=torch.int32)[
        torch.randperm(71, generator=gen)]
    rows, sums = torch.randn(71, 24, generator=gen).bfloat16(), torch.randn(10, 24, generator=gen)
    expected = sums.clone().index_add_(0, ids.long(), rows.float())
    sorted_ids, order = ids.sort()
    embedding_bench.sorted_add_rows(sums, sorted_ids, order, rows, (16, 16, 4))
    torch.testing.assert_close(sums, expected, rtol=1e-6, atol=1e-5)
