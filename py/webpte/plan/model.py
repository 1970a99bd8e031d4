"""The Plan: a serialisable description of buffers, kernels and dispatches.

Executors (wgpu-py natively, JS in the page) interpret a Plan and know nothing
about ops.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from ..errors import PlanError
from .interleave import check as interleave_check
from .interleave import interleaved_bytes
from .validate import validate_plan

PLAN_VERSION = 1


@dataclass
class BufferSpec:
    """One GPU buffer. `init` says what it holds at load (and after reset for state)."""

    id: int
    size: int                      # bytes, a multiple of 4
    role: str                      # constant | activation | input | output | state | scalar
    label: str = ""
    # None (no initial content), {"kind": "zeros"},
    # {"kind": "file", "offset": int, "nbytes": int, "convert": None | "u8_to_u32" | "i64_to_i32",
    #  "file"?: int} (`file`: 0 or absent the .pte, k the k-th external data file, .ptd),
    # {"kind": "words", "words": [u32, ...]} (per-dispatch scalars, little endian),
    # {"kind": "file_parts", "parts": [{"offset", "nbytes", "file"?}, ...], "interleave"?: {...}}
    # (file ranges back to back; `interleave`: rows regrouped, plan.interleave)
    init: dict | None = None
    values: list[int] = field(default_factory=list)  # graph value ids held (dedicated buffers)


@dataclass
class KernelSpec:
    id: int
    name: str
    wgsl: str
    entry: str = "main"


@dataclass
class DispatchSpec:
    kernel: int
    bindings: list[int]            # buffer ids, binding i of group 0
    workgroups: tuple[int, int, int]
    op: str = ""                   # serialized op name, for errors and profiles
    node: int = -1                 # index of the op in the graph chain
    # Work its unit counted, for rooflines (webpte.roofline): {"bytes_read": int,
    # "macs": int (int8 multiply-adds)}; None: not counted. Executors ignore it.
    cost: dict | None = None


@dataclass
class ReadoutSpec:
    """A device-side readout of the logits (kernels/sampling/topk.py): the best `k` token
    ids, then their logits, in `buffer` after `dispatches` ran behind the plan's own; a call
    asking for it reads back only its first `read_bytes` instead of the outputs."""

    k: int
    dispatches: list[DispatchSpec]
    buffer: int
    read_bytes: int = 0            # 4 * k ids + 4 * k logits; 4 for k = 1 (the id only)

    def __post_init__(self):
        self.read_bytes = self.read_bytes or (4 if self.k == 1 else 8 * self.k)


@dataclass
class IOSpec:
    """A method input or output: host dtype/shape and how it sits on the GPU."""

    buffer: int
    dtype: str                     # numpy dtype the method takes or gives
    shape: tuple[int, ...]
    storage: str                   # f32 | i32 | i8 | u8 | bool (see plan.storage)
    name: str | None = None


@dataclass
class Plan:
    method: str
    buffers: list[BufferSpec]
    kernels: list[KernelSpec]
    dispatches: list[DispatchSpec]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    state: list[int] = field(default_factory=list)     # buffers zeroed by reset()
    limits: dict[str, int] = field(default_factory=dict)
    max_context: int | None = None                     # decoder: input_pos + rows bound
    # WGSL language features its kernels require, and device features ("subgroups")
    features: list[str] = field(default_factory=list)
    readouts: list[ReadoutSpec] = field(default_factory=list)  # decoders: argmax / top-k
    version: int = PLAN_VERSION

    def memory(self) -> dict[str, int]:
        """Bytes of device memory by role."""
        out: dict[str, int] = {}
        for b in self.buffers:
            out[b.role] = out.get(b.role, 0) + b.size
        out["total"] = sum(b.size for b in self.buffers)
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> Plan:
        """The Plan of a `to_json()` text, every field checked (PlanError when malformed)."""
        return plan_from_json(text)


# -- reading a Plan from JSON given by anyone ------------------------------------
# Checked field by field first: the rules of the page's `parsePlan` (web/plan.js), so a plan
# the page refuses is refused here too, plus the types of the informational fields (labels,
# value ids, op names) and integers that are JSON integers (JS cannot tell 16.0 from 16).
# Every problem is a PlanError naming the field.

ROLES = {"constant", "activation", "input", "output", "state", "scalar"}
STORAGE_BYTES = {"f32": 4, "i32": 4, "i8": 1, "u8": 1, "bool": 4}
# Host dtypes the page has a TypedArray for (web/plan.js DTYPE_ARRAYS).
DTYPES = {"float32", "float64", "int32", "int64", "int16", "int8", "uint8", "uint16", "uint32",
          "bool"}
_SAFE = (1 << 53) - 1   # JS Number.isSafeInteger
# A file init's conversion -> buffer bytes per file byte.
_CONVERT_SIZE = {None: 1, "u8_to_u32": 4, "i64_to_i32": 0.5}


def _fail(what: str):
    raise PlanError(f"malformed plan: {what}; re-plan the program with this webpte version")


def _count(x) -> bool:
    return type(x) is int and 0 <= x <= _SAFE


def _record(d, cls, what: str) -> dict:
    """`d` as keyword arguments of dataclass `cls`: an object with no unknown field."""
    if not isinstance(d, dict):
        _fail(f"{what} is not an object")
    names = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in d if k not in names)
    if unknown:
        _fail(f"{what} has unknown fields {unknown[:4]}")
    return dict(d)


def _required(d: dict, keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in d]
    if missing:
        _fail(f"{what} lacks {missing}")


def _list(x, what: str) -> list:
    if not isinstance(x, list):
        _fail(f"{what} is not a list")
    return x


def _buffer(b, i: int) -> BufferSpec:
    kw = _record(b, BufferSpec, f"buffer {i}")
    _required(kw, ("id", "size", "role"), f"buffer {i}")
    if kw["id"] != i or type(kw["id"]) is not int:
        _fail(f"buffer {i} has id {kw['id']!r:.20}")
    size = kw["size"]
    if not _count(size) or size == 0 or size % 4:
        _fail(f"buffer {i} size {size!r:.20} is not a positive multiple of 4")
    if not isinstance(kw["role"], str) or kw["role"] not in ROLES:
        _fail(f"buffer {i} role {kw['role']!r:.20}")
    if not isinstance(kw.get("label", ""), str):
        _fail(f"buffer {i} label is not a string")
    if not all(type(v) is int for v in _list(kw.get("values", []), f"buffer {i} values")):
        _fail(f"buffer {i} values are not value ids")
    _init(kw.get("init"), size, i)
    return BufferSpec(**kw)


def _init(init, size: int, i: int) -> None:
    if init is None:
        return
    if not isinstance(init, dict):
        _fail(f"buffer {i} init is not an object")
    kind = init.get("kind")
    if kind == "zeros":
        return
    if kind == "words":
        words = _list(init.get("words"), f"buffer {i} words")
        if not all(_count(w) and w <= 0xFFFFFFFF for w in words):
            _fail(f"buffer {i} words are not u32 values")
        if 4 * len(words) > size:
            _fail(f"buffer {i} holds {size} bytes, its {len(words)} words need {4 * len(words)}")
        return
    if kind == "file_parts":   # file ranges back to back (Lowering.joined_constant)
        parts = _list(init.get("parts"), f"buffer {i} parts")
        if not parts or not all(isinstance(p, dict) and _count(p.get("offset"))
                                and _count(p.get("nbytes")) and _count(p.get("file", 0))
                                for p in parts):
            _fail(f"buffer {i} file parts")
        need = sum(p["nbytes"] for p in parts)
        if "interleave" in init:
            why = interleave_check(init["interleave"], need)
            if why:
                _fail(f"buffer {i} {why}")
            need = interleaved_bytes(init["interleave"])
        if need > size:
            _fail(f"buffer {i} holds {size} bytes, its file parts are {need}")
        return
    if kind != "file":
        _fail(f"buffer {i} init kind {kind!r:.20}")
    if not (_count(init.get("offset")) and _count(init.get("nbytes"))
            and _count(init.get("file", 0))):   # file: 0 the .pte, k the k-th data file
        _fail(f"buffer {i} file range")
    convert = init.get("convert")
    if convert not in _CONVERT_SIZE:
        _fail(f"buffer {i} convert {convert!r:.20}")
    if convert == "i64_to_i32" and init["nbytes"] % 8:
        _fail(f"buffer {i} narrows {init['nbytes']} bytes, not whole int64 values")
    need = int(init["nbytes"] * _CONVERT_SIZE[convert])
    if need > size:
        _fail(f"buffer {i} holds {size} bytes, its file content is {need}")


def _kernel(k, i: int) -> KernelSpec:
    kw = _record(k, KernelSpec, f"kernel {i}")
    _required(kw, ("id", "name", "wgsl", "entry"), f"kernel {i}")
    if not (type(kw["id"]) is int and isinstance(kw["name"], str)
            and isinstance(kw["wgsl"], str) and isinstance(kw["entry"], str)):
        _fail(f"kernel {i} has no id/name/wgsl/entry")
    return KernelSpec(**kw)


def _dispatch(x, i: int, n_kernels: int, n_buffers: int) -> DispatchSpec:
    kw = _record(x, DispatchSpec, f"dispatch {i}")
    _required(kw, ("kernel", "bindings", "workgroups"), f"dispatch {i}")
    if type(kw["kernel"]) is not int or not 0 <= kw["kernel"] < n_kernels:
        _fail(f"dispatch {i} kernel {kw['kernel']!r:.20}")
    for j, b in enumerate(_list(kw["bindings"], f"dispatch {i} bindings")):
        _buffer_id(b, n_buffers, f"dispatch {i} binding {j}")
    wg = kw["workgroups"]
    if not (isinstance(wg, list) and len(wg) == 3 and all(_count(w) for w in wg)):
        _fail(f"dispatch {i} workgroups {wg!r:.40}")
    if not (isinstance(kw.get("op", ""), str) and type(kw.get("node", -1)) is int):
        _fail(f"dispatch {i} op/node")
    if "cost" in kw and kw["cost"] is not None and not isinstance(kw["cost"], dict):
        _fail(f"dispatch {i} cost is not an object")
    return DispatchSpec(**{**kw, "workgroups": tuple(wg)})


def _buffer_id(b, n_buffers: int, what: str) -> int:
    if type(b) is not int or not 0 <= b < n_buffers:
        _fail(f"{what} names buffer {b!r:.20} of {n_buffers}")
    return b


def _io(x, what: str, buffers: list[BufferSpec]) -> IOSpec:
    kw = _record(x, IOSpec, what)
    _required(kw, ("buffer", "dtype", "shape", "storage"), what)
    buf = buffers[_buffer_id(kw["buffer"], len(buffers), what)]
    if not isinstance(kw["storage"], str) or kw["storage"] not in STORAGE_BYTES:
        _fail(f"{what} storage {kw['storage']!r:.20}")
    if not isinstance(kw["dtype"], str) or kw["dtype"] not in DTYPES:
        _fail(f"{what} dtype {kw['dtype']!r:.20}")
    shape = kw["shape"]
    if not (isinstance(shape, list) and all(_count(d) for d in shape)):
        _fail(f"{what} shape {shape!r:.40}")
    if kw.get("name") is not None and not isinstance(kw["name"], str):
        _fail(f"{what} name is not a string")
    need = STORAGE_BYTES[kw["storage"]]
    for d in shape:
        need *= d
    if need > buf.size:
        _fail(f"{what} needs {need} bytes, buffer {buf.id} has {buf.size}")
    return IOSpec(**{**kw, "shape": tuple(shape)})


def _readout(x, i: int, n_kernels: int, buffers: list[BufferSpec]) -> ReadoutSpec:
    kw = _record(x, ReadoutSpec, f"readout {i}")
    _required(kw, ("k", "dispatches", "buffer", "read_bytes"), f"readout {i}")
    if not _count(kw["k"]) or kw["k"] == 0:
        _fail(f"readout {i} k {kw['k']!r:.20}")
    buf = buffers[_buffer_id(kw["buffer"], len(buffers), f"readout {i}")]
    size = kw["read_bytes"]
    if not _count(size) or size == 0 or size % 4 or size > buf.size:
        _fail(f"readout {i} reads {size!r:.20} bytes of buffer {buf.id} ({buf.size})")
    ds = [_dispatch(d, j, n_kernels, len(buffers))
          for j, d in enumerate(_list(kw["dispatches"], f"readout {i} dispatches"))]
    return ReadoutSpec(kw["k"], ds, kw["buffer"], size)


def plan_from_json(text: str) -> Plan:
    """Parse and check a `Plan.to_json()` text; PlanError for anything malformed."""
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as e:   # RecursionError: nesting too deep
        _fail(f"not JSON ({type(e).__name__}: {str(e)[:80]})")
    if not isinstance(d, dict):
        _fail("not an object")
    if d.get("version") != PLAN_VERSION or type(d.get("version")) is not int:
        _fail(f"version {d.get('version')!r:.20}, this webpte reads {PLAN_VERSION}")
    kw = _record(d, Plan, "the plan")
    _required(kw, ("method", "buffers", "kernels", "dispatches", "inputs", "outputs", "state",
                   "limits"), "the plan")
    if not isinstance(kw["method"], str):
        _fail("method is not a string")
    buffers = [_buffer(b, i) for i, b in enumerate(_list(kw["buffers"], "buffers"))]
    kernels = [_kernel(k, i) for i, k in enumerate(_list(kw["kernels"], "kernels"))]
    dispatches = [_dispatch(x, i, len(kernels), len(buffers))
                  for i, x in enumerate(_list(kw["dispatches"], "dispatches"))]
    inputs = [_io(x, f"inputs[{i}]", buffers) for i, x in enumerate(_list(kw["inputs"], "inputs"))]
    outputs = [_io(x, f"outputs[{i}]", buffers)
               for i, x in enumerate(_list(kw["outputs"], "outputs"))]
    state = [_buffer_id(s, len(buffers), f"state[{i}]")
             for i, s in enumerate(_list(kw["state"], "state"))]
    limits = kw["limits"]
    if not (isinstance(limits, dict) and all(_count(v) for v in limits.values())):
        _fail("limits is not an object of counts")
    max_context = kw.get("max_context")
    if max_context is not None and not _count(max_context):
        _fail(f"max_context {max_context!r:.20}")
    features = kw.get("features", [])
    if not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        _fail("features is not a list of names")
    readouts = [_readout(x, i, len(kernels), buffers)
                for i, x in enumerate(_list(kw.get("readouts", []), "readouts"))]
    plan = Plan(method=kw["method"], buffers=buffers, kernels=kernels, dispatches=dispatches,
                inputs=inputs, outputs=outputs, state=state, limits=limits,
                max_context=max_context, features=features, readouts=readouts,
                version=PLAN_VERSION)
    validate_plan(plan)   # the rules the page's parsePlan applies too (web/plan_validate.js)
    return plan
