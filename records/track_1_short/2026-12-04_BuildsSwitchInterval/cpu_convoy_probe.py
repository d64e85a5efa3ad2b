"""The GIL convoy the switch interval shortens, on the CPU: a thread back from I/O or a C call waits up to the switch
interval for a thread running Python to let go of the GIL. Times Triton's cache key (1-MiB reads and hashes of
libtriton.so) on a worker thread beside a main thread running Python, and an import of torch._inductor.compile_fx on
the main thread beside a worker thread running Python, each alone and beside, at the given switch intervals.
Usage: python cpu_convoy_probe.py [INTERVAL_SECONDS ...]   (default 0.005 0.001 0.0005 0.0002)"""
import subprocess
import sys

TRITON_KEY = """
import sys, threading, time
import triton.runtime.cache as cache
sys.setswitchinterval({interval})
cache.triton_key(); cache.triton_key.cache_clear()  # the file in the page cache, as in a warm start
start = time.perf_counter(); cache.triton_key(); alone = time.perf_counter() - start
cache.triton_key.cache_clear()
took = []
worker = threading.Thread(target=lambda: (start := time.perf_counter(), cache.triton_key(),
                                          took.append(time.perf_counter() - start)))
worker.start()
while worker.is_alive():
    sum(range(200))
print(f"triton_key alone {{alone:.2f}}s, on a thread beside a main thread running Python {{took[0]:.2f}}s")
"""

IMPORT = """
import sys, threading, time
import torch
sys.setswitchinterval({interval})
running = {beside}
def python_loop():
    while running:
        sum(range(200))
threading.Thread(target=python_loop).start()
start = time.perf_counter()
import torch._inductor.compile_fx
took = time.perf_counter() - start
running = False
print(f"import torch._inductor.compile_fx {{'beside a thread running Python' if {beside} else 'alone'}} {{took:.2f}}s")
"""

for interval in map(float, sys.argv[1:] or ["0.005", "0.001", "0.0005", "0.0002"]):
    for code in (TRITON_KEY.format(interval=interval), IMPORT.format(interval=interval, beside=False),
                 IMPORT.format(interval=interval, beside=True)):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        print(f"switch interval {interval * 1e3:.1f} ms: {result.stdout.strip()}")
