import os  # session 71: cuBLASLt without workspace (its own, not the cuBLAS one)
os.environ["CUBLASLT_WORKSPACE_SIZE"] = "0"
os.environ["TORCH_CUBLASLT_UNIFIED_WORKSPACE"] = "0"
