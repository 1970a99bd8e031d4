"""`make gpu-check`: webpte natively on this computer's GPU, in one report.

Finds a hardware (non-CPU) WebGPU adapter with wgpu-py. When webpte's default adapter is a CPU
one (lavapipe) although a GPU is listed, Vulkan is pointed at the other installed drivers
(VK_ICD_FILENAMES) before anything runs. On that adapter it runs the committed op catalog
subset (`webpte conformance`) and `webpte bench --roofline` on the SmolLM2 decoder with the
GPU decode variants, each in a subprocess, and prints the adapter, the catalog's summary and
the roofline table. Exit status: 0 when every case passes and the bench ran, 1 when a case
fails or the decoder is missing, 2 without a hardware adapter.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "tests" / "fixtures" / "op_catalog"
# Vulkan drivers that run on the CPU: never the GPU this check is for.
CPU_ICDS = ("lvp_icd", "swiftshader")
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
# What `webpte.native.adapter_info()` gives in a fresh process with this environment.
ADAPTER_PROBE = ("import json; from webpte.native import adapter_info; "
                 "print(json.dumps(adapter_info()))")


def listed_adapters() -> list[dict]:
    """Every adapter wgpu-py lists here: vendor, device, adapter_type, backend_type."""
    import wgpu

    return [dict(a.info) for a in wgpu.gpu.enumerate_adapters_sync()]


def is_hardware(info: dict) -> bool:
    return info.get("adapter_type") in ("DiscreteGPU", "IntegratedGPU", "VirtualGPU")


def default_adapter(env: dict) -> dict:
    """The adapter webpte takes under `env` ({} when it finds none)."""
    out = subprocess.run([sys.executable, "-c", ADAPTER_PROBE], env=env, capture_output=True,
                         text=True)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if out.returncode == 0 and lines else {}


def gpu_environment(any_adapter: bool = False) -> tuple[dict, dict] | None:
    """(environment, adapter) under which webpte's default adapter is a hardware one (or,
    with `any_adapter`, whichever it takes)."""
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    info = default_adapter(env)
    if is_hardware(info) or (any_adapter and info):
        return env, info
    icds = sorted(p for d in ICD_DIRS for p in glob.glob(f"{d}/*.json")
                  if not any(c in Path(p).name for c in CPU_ICDS))
    if not icds:
        return None
    env["VK_ICD_FILENAMES"] = os.pathsep.join(icds)
    info = default_adapter(env)
    return (env, info) if is_hardware(info) else None


def run_catalog(env: dict, out: Path) -> tuple[str, bool]:
    """The catalog subset's summary line and whether every case passed."""
    report = out / "catalog.json"
    proc = subprocess.run([sys.executable, "-m", "webpte.cli", "conformance", str(CATALOG),
                           "--json", str(report)], env=env, capture_output=True, text=True)
    summary = next((line for line in proc.stdout.splitlines() if line.startswith("summary:")),
                   f"no summary (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    failures = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    return "\n".join([summary, *failures[:20]]), proc.returncode == 0


def run_bench(env: dict, decoder: Path, variants: str, calls: int) -> tuple[str, bool]:
    """The roofline table of the decoder's variants on this adapter."""
    from webpte.bench import format_roofline

    proc = subprocess.run([sys.executable, "-m", "webpte.cli", "bench", "--roofline", "--json",
                           "--calls", str(calls), "--variants", variants, str(decoder)],
                          env=env, capture_output=True, text=True)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not results:
        return f"bench failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}", False
    return format_roofline([{"driver": "native", **r} for r in results]), True


def main(argv=None) -> int:
    from webpte.build.smollm2 import default_folder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--decoder", type=Path, default=default_folder() / "decoder_q8.pte",
                   help="the decoder to bench (default: the SmolLM2 folder of `make model`)")
    p.add_argument("--variants", default="splitk,skinny",
                   help="decode variants to compare (webpte bench --variants)")
    p.add_argument("--calls", type=int, default=7, help="timed calls per variant")
    p.add_argument("--out", type=Path, default=ROOT / "out" / "gpu-check",
                   help="folder for the catalog's per-case JSON")
    p.add_argument("--any-adapter", action="store_true",
                   help="run on the adapter webpte takes even when it is a CPU one (to try "
                        "the report on a machine without a GPU)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    print("adapters wgpu lists:")
    for a in listed_adapters():
        print(f"  {a.get('adapter_type', '?'):14} {a.get('backend_type', '?'):8} "
              f"{a.get('device', '?')} ({a.get('description', '')})")
    found = gpu_environment(args.any_adapter)
    if found is None:
        print("no hardware adapter: webpte finds only CPU adapters here. Install the GPU's "
              "Vulkan driver (e.g. nvidia, mesa-vulkan-drivers for AMD/Intel) and run again.")
        return 2
    env, info = found
    icd = env.get("VK_ICD_FILENAMES")
    print(f"running on: {info.get('device')} ({info.get('adapter_type')}, "
          f"{info.get('backend_type', '?')})" + (f"; VK_ICD_FILENAMES={icd}" if icd else ""))

    catalog, catalog_ok = run_catalog(env, args.out)
    print(f"\nop catalog subset ({CATALOG.relative_to(ROOT)}):\n{catalog}")
    if not args.decoder.is_file():
        print(f"\nno decoder at {args.decoder}: `make model` builds SmolLM2")
        return 1
    table, bench_ok = run_bench(env, args.decoder, args.variants, args.calls)
    print(f"\nroofline of {args.decoder.name} ({args.variants}, {args.calls} calls):\n{table}")
    return 0 if catalog_ok and bench_ok else 1


if __name__ == "__main__":
    sys.exit(main())
