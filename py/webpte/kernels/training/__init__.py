"""Training kernel units: ExecuTorch main's WebGPU training ops."""
