"""A track script as a module, for the perf tools that read its kernels, launches or model (no other imports, so that
perf/kernel_report.py can load it after leaving Triton's interpreter and perf/trace_time.py times only the tracing)."""
import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"short": ROOT / "train_gpt.py", "medium": ROOT / "train_gpt_medium.py"}  # by track


def load_script(path):
    """The repository's own train_gpt.py or train_gpt_medium.py by import (a process registers a script's custom ops
    once, so every caller, the tests' included, shares the module); a copy of another version (e.g. in perf/base/)
    from its file, as module copy_NAME in sys.modules (inspect.getsource and dynamo look a module up by name)."""
    path = Path(path).resolve()
    if path.parent == ROOT:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        return importlib.import_module(path.stem)
    spec = importlib.util.spec_from_file_location(f"copy_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
