"""Reads perf/mlp_bench.py's output; if its best one-pass launch is >= 3% faster than the script's, writes
train_gpt.py with RELU_SQUARE_LAUNCH set to it to argv[2] and prints the launch; else prints 'none'."""
import re
import sys

text = open(sys.argv[1]).read()
times = {m[1]: float(m[2]) for m in re.finditer(r"^(\(\d+, \d+, \d+\)) one pass: ([0-9.]+) us", text, re.M)}
source = open("train_gpt.py").read()
script = re.search(r"^RELU_SQUARE_LAUNCH = (\(\d+, \d+, \d+\))", source, re.M)[1]
best = min(times, key=times.get)
print(f"script {script} {times.get(script)} us, best {best} {times[best]} us")
if best != script and times[best] <= 0.97 * times[script]:
    open(sys.argv[2], "w").write(source.replace(f"RELU_SQUARE_LAUNCH = {script}", f"RELU_SQUARE_LAUNCH = {best}", 1))
    print("picked", best)
else:
    print("none")
