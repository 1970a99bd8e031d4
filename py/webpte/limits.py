"""WebGPU limits a program is planned for and its device created within: the
specification's defaults, and caps given as `limits=` (Python) or `--limits` (CLI)."""

from __future__ import annotations

import argparse

from .errors import InputError

DEFAULT_LIMITS = {
    "max_buffer_size": 268435456,
    "max_storage_buffer_binding_size": 134217728,
    "max_uniform_buffer_binding_size": 65536,
    "max_storage_buffers_per_shader_stage": 8,
    "max_uniform_buffers_per_shader_stage": 12,
    "max_compute_workgroup_size_x": 256,
    "max_compute_workgroup_size_y": 256,
    "max_compute_workgroup_size_z": 64,
    "max_compute_invocations_per_workgroup": 256,
    "max_compute_workgroups_per_dimension": 65535,
}


def resolve_limits(limits: str | dict | None) -> dict[str, int] | None:
    """A limits argument as a dict: None (the adapter's own), "default" (WebGPU's defaults)
    or a dict capping some of `DEFAULT_LIMITS`' names with positive ints."""
    if limits is None:
        return None
    if limits == "default":
        return dict(DEFAULT_LIMITS)
    if not isinstance(limits, dict):
        raise InputError(f"limits {limits!r:.40}: give 'default' or a dict of limits")
    unknown = sorted(set(limits) - set(DEFAULT_LIMITS))
    if unknown:
        raise InputError(f"unknown limits {unknown}; known: {', '.join(DEFAULT_LIMITS)}")
    if not all(type(v) is int and v > 0 for v in limits.values()):
        raise InputError(f"limits {limits}: each must be a positive int")
    return dict(limits)


def parse_limits(text: str) -> str | dict[str, int]:
    """A --limits value: "default", or NAME=BYTES[,NAME=BYTES...] (resolve_limits checks)."""
    if text == "default":
        return text
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(f"{text!r}: give 'default' or NAME=INT[,NAME=INT...]")
        out[name.strip()] = int(value)
    try:
        resolve_limits(out)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return out


def add_limits_argument(parser) -> None:
    """The --limits option of run and chat."""
    parser.add_argument(
        "--limits", type=parse_limits, default=None,
        help="plan for and create the device with WebGPU's default limits ('default') or "
             "these caps (max_storage_buffer_binding_size=134217728,...): weights past the "
             "binding limit are split; default: the adapter's own limits")
