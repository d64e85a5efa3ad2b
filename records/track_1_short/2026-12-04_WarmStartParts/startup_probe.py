"""Session 48, call 5: where a warm start's seconds go. Runs train_gpt.py's main with timers around its start-up
functions and every Triton compile (a disk-cache hit takes ~0.1 s), printing '[at s] name: took s (thread)'."""
import sys
import threading
import time

sys.path.insert(0, ".")
import train_gpt as tg  # noqa: E402
import triton.compiler  # noqa: E402


def timed(name, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            label = name if name != "triton compile" else f"triton compile {getattr(args[0], 'name', '?')}"
            print(f"[{end - tg.PROCESS_START:6.2f}] {label}: {end - start:.2f}s ({threading.current_thread().name})",
                  flush=True)
    return wrapper


for name in ["check_settings", "check_data", "configure_triton_builds", "init_distributed", "tiny_kernel_launches",
             "load_compile_cache", "open_log", "build_optimizers", "load_val_tokens", "window_tensors", "warmup",
             "newton_schulz_builds", "save_compile_cache"]:
    setattr(tg, name, timed(name, getattr(tg, name)))
tg.GPT.__init__ = timed("GPT.__init__", tg.GPT.__init__)
tg.KernelBuilds.__init__ = timed("KernelBuilds.__init__", tg.KernelBuilds.__init__)
original_finished_at = tg.KernelBuilds.finished_at
tg.KernelBuilds.finished_at = staticmethod(timed("a build", original_finished_at))
triton.compiler.compile = timed("triton compile", triton.compiler.compile)
sys.argv = ["train_gpt.py", *sys.argv[1:]]
tg.main()
