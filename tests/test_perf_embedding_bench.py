"""perf/embedding_bench.py on small shapes on the CPU (--tiny, the kernels under Triton's interpreter): every way of
the four tables' backward is timed and checked against the fp32 sums, add_rows_kernel at its tiny launch among them,
and the hand-over is timed (the GPU numbers come from the device). Run in
this process, so that the interpreter fixture's patch applies."""

import re
import sys


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
    errors, launches = {}, []
    for line in lines:
        match = re.fullmatch(r"(eager|compiled|add_rows_kernel)( \(.+\)| BLOCK_TOKENS=(\d+) BLOCK_COLS=(\d+) "
                             r"warps=(\d+)( \(the script's\))? \(with the ids' sort\)): [\d.]+ ms for 4 tables, "
                             r"largest gradient error ([\d.e+-]+) of the largest entry", line)
        assert match, line
        errors.setdefault(match[1], []).append(float(match[7]))
        if match[3]:
            launches.append(((int(match[3]), int(match[4]), int(match[5])), bool(match[6])))
    assert set(errors) == {"eager", "compiled", "add_rows_kernel"}
    assert [launch for launch, _ in launches] == embedding_bench.TINY_ADD_ROWS_LAUNCHES
    assert [marked for _, marked in launches] == [launch == tg.ADD_ROWS_LAUNCH for launch, _ in launches]
    # inductor sums each entry in fp32, then rounds once to bf16; the CPU's eager backward sums in bf16, a looser
    # bound; add_rows_kernel's sums stay fp32 (only the adds' order differs)
    assert 0 < errors["compiled"][0] <= 2 ** -8 and errors["eager"][0] < 0.05
    assert all(error < 1e-6 for error in errors["add_rows_kernel"]), errors


def test_without_a_proxy_shard_the_ids_are_drawn_and_a_note_says_so(repo_root, monkeypatch, tmp_path, capsys):
    """(A GPU run without data/proxy/ timed drawn ids where its help promised training's, silently.)"""
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    monkeypatch.setattr(embedding_bench, "PROXY_SHARDS", str(tmp_path / "proxy_train_*.bin"))
    ids = embedding_bench.token_ids(64, 100, tiny=False, device="cpu")
    assert ids.shape == (64,) and int(ids.max()) < 100
    assert capsys.readouterr().err.startswith(f"note: no proxy shard matches {tmp_path / 'proxy_train_*.bin'}: ")
    embedding_bench.token_ids(64, 100, tiny=True, device="cpu")  # --tiny draws them by design: no note
    assert capsys.readouterr().err == ""
