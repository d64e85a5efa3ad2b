"""Scratch (session 55): Triton launches on four threads at once, each launch a new specialisation of one of 16
kernels of different arity, so that each builds a CompiledKernel whose launcher module was loaded before.
python launcher_race.py OUT_DIR plain|patched SWITCH_INTERVAL ROUNDS SEED"""
import importlib, json, os, random, sys, threading, time

ARITIES = list(range(3, 19))


def kernels_source() -> str:
    lines = ["import triton", "import triton.language as tl", ""]
    for n in ARITIES:
        params = ", ".join(f"a{i}" for i in range(n - 1))
        total = " + ".join(f"a{i}" for i in range(n - 1))
        lines += ["@triton.jit", f"def k{n}(out_ptr, {params}):", f"    tl.store(out_ptr + {n}, {total})", ""]
    return "\n".join(lines)


def main():
    out_dir, mode = sys.argv[1], sys.argv[2]
    interval, rounds, seed = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "race_kernels.py"), "w") as f:
        f.write(kernels_source())
    sys.path.insert(0, out_dir)
    import torch
    import triton
    race_kernels = importlib.import_module("race_kernels")
    if mode == "patched":
        sys.path.insert(0, os.getcwd())
        import train_gpt
        train_gpt.launchers_one_at_a_time(triton.runtime.driver.active)
    out = torch.zeros(32, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    errors, last, barrier = [], {}, threading.Barrier(4)

    def launch_all(arities, thread):
        torch.cuda.set_device(0)
        rng = random.Random(seed * 100 + thread)
        barrier.wait()
        for _ in range(rounds):
            for n in arities:
                args = [rng.choice((3, 32)) for _ in range(n - 1)]  # 32: Triton specialises on divisibility by 16
                try:
                    getattr(race_kernels, f"k{n}")[(1,)](out, *args)
                    last[n] = sum(args)
                except Exception as error:
                    errors.append(f"k{n}: {type(error).__name__}: {error}")

    sys.setswitchinterval(interval)
    start = time.perf_counter()
    groups = [ARITIES[i::4] for i in range(4)]
    threads = [threading.Thread(target=launch_all, args=(groups[i], i)) for i in range(1, 4)]
    for thread in threads:
        thread.start()
    launch_all(groups[0], 0)
    for thread in threads:
        thread.join()
    torch.cuda.synchronize()
    values = out.tolist()
    wrong = [n for n, total in last.items() if values[n] != total]
    print(json.dumps({"mode": mode, "interval": interval, "launches": rounds * len(ARITIES), "errors": len(errors),
                      "wrong_values": wrong, "first_errors": errors[:2],
                      "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
