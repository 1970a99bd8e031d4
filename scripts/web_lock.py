"""Lock-file steps of scripts/build_web.sh.

`base CORE_LOCK OUT`: a lock with the Pyodide core's platform info and no packages (the
page must not reach for the CDN's packages).
`check LOCK`: drop webpte's native-only dependencies (numpy: references and the native
executor; wgpu: the native executor; the page imports neither, see
tests/test_plan_without_numpy.py), then require every dependency to be in the lock and every
wheel to sit beside it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NATIVE_ONLY = {"numpy", "wgpu"}


def base(core_lock: str, out: str) -> None:
    info = json.loads(Path(core_lock).read_text())["info"]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"info": info, "packages": {}}))


def check(lock_path: str) -> None:
    path = Path(lock_path)
    lock = json.loads(path.read_text())
    pkgs = lock["packages"]
    pkgs["webpte"]["depends"] = [d for d in pkgs["webpte"]["depends"] if d not in NATIVE_ONLY]
    for name in NATIVE_ONLY:
        pkgs.pop(name, None)
    for name, p in pkgs.items():
        missing = [d for d in p["depends"] if d not in pkgs]
        if missing:
            sys.exit(f"web lock: {name} depends on {missing}, which are not bundled")
        if not (path.parent / p["file_name"]).is_file():
            sys.exit(f"web lock: {p['file_name']} is not beside {path}")
    path.write_text(json.dumps(lock, indent=1, sort_keys=True))
    print("web lock:", ", ".join(f"{n} {p['version']}" for n, p in sorted(pkgs.items())))


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"base": base, "check": check}[cmd](*args)
