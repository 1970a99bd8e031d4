"""Execute a Plan on wgpu-py: everything is created at load, a call only records
dispatches into one command encoder, submits once and reads the outputs (or only a
readout's few words: the best token ids of the logits, Plan.readouts).

Several calls (a prompt's windows) may go in one submit: their inputs are uploaded side by
side into one staging buffer first and each call copies its own into the input buffers
inside the command stream, so they only depend on each other through state (KV caches)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, PlanError
from ..plan.interleave import interleave
from ..plan.io import from_storage_bytes, to_storage_bytes
from ..plan.model import Plan
from ..plan.validate import validate_plan
from ..pte.data_file import file_source
from .device import check_features, device_limits, get_device

# The word `Executor.poison` fills buffers with: a NaN as f32, and no kernel's NaN (theirs are
# 0x7fc00000 or its sign flip), so a poisoned element is told from a computed NaN.
POISON_WORD = 0x7FC0DEAD
class Executor:
    """A Plan made real on one wgpu device."""

    def __init__(self, plan: Plan, data=None, limits: dict[str, int] | None = None):
        """`data`: the bytes constants are uploaded from: the .pte's, or a list of the .pte's
        then each data file's (a file init's `"file"` indexes it). `limits`: a cap
        (plan.validate.resolve_limits) the device is created within."""
        import wgpu

        self.plan = plan
        self.device = dev = get_device(plan.limits, limits)
        check_features(plan.features)
        validate_plan(plan, device_limits(limits))
        usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
                 | wgpu.BufferUsage.COPY_SRC)
        self.buffers = [dev.create_buffer(size=b.size, usage=usage, label=b.label)
                        for b in plan.buffers]
        for b in plan.buffers:
            self._initialise(b, data)
        self.pipelines = []
        for k in plan.kernels:
            try:
                module = dev.create_shader_module(code=k.wgsl, label=k.name)
                self.pipelines.append(dev.create_compute_pipeline(
                    layout="auto", compute={"module": module, "entry_point": k.entry},
                    label=k.name))
            except Exception as e:  # wgpu reports WGSL/validation errors as its own types
                raise PlanError(f"kernel {k.name} failed to compile: {e}\n{k.wgsl}") from e
        self.bind_groups = [self._bind_group(d) for d in plan.dispatches]
        self.call_steps = self._steps(plan.dispatches, self.bind_groups)
        self.staging = [dev.create_buffer(size=plan.buffers[o.buffer].size,
                                          usage=wgpu.BufferUsage.MAP_READ
                                          | wgpu.BufferUsage.COPY_DST)
                        for o in plan.outputs]
        self.readouts = {}   # k -> (ReadoutSpec, bind groups, staging buffer)
        for r in plan.readouts:
            groups = [self._bind_group(d) for d in r.dispatches]
            self.readouts[r.k] = (r, self._steps(r.dispatches, groups),
                                  dev.create_buffer(size=r.read_bytes,
                                                    usage=wgpu.BufferUsage.MAP_READ
                                                    | wgpu.BufferUsage.COPY_DST))
        self.input_ring = None   # staging of several calls' inputs (grown by run_calls)

    def _steps(self, dispatches, groups) -> list[tuple]:
        """(pipeline or None, bind group, x, y, z) per dispatch, made once at load: encoding
        a call is then one pass over tuples (each wgpu-py call costs Python and cffi time),
        and None where the previous dispatch already set the same pipeline."""
        steps, last = [], None
        for d, bg in zip(dispatches, groups):
            pipe = self.pipelines[d.kernel]
            steps.append((None if pipe is last else pipe, bg, *d.workgroups))
            last = pipe
        return steps

    @staticmethod
    def _encode(enc, steps) -> None:
        cpass = enc.begin_compute_pass()
        set_pipeline, set_bind_group = cpass.set_pipeline, cpass.set_bind_group
        dispatch = cpass.dispatch_workgroups
        for pipe, bg, x, y, z in steps:
            if pipe is not None:
                set_pipeline(pipe)
            set_bind_group(0, bg)
            dispatch(x, y, z)
        cpass.end()

    def _bind_group(self, d):
        return self.device.create_bind_group(
            layout=self.pipelines[d.kernel].get_bind_group_layout(0),
            entries=[{"binding": i, "resource": {"buffer": self.buffers[b], "offset": 0,
                                                 "size": self.plan.buffers[b].size}}
                     for i, b in enumerate(d.bindings)])

    def _initialise(self, b, data) -> None:
        init = b.init
        if init is None:
            return
        if init["kind"] == "zeros":
            self.device.queue.write_buffer(self.buffers[b.id], 0, bytes(b.size))
        elif init["kind"] == "words":
            raw = np.asarray(init["words"], np.uint32).tobytes()
            self.device.queue.write_buffer(self.buffers[b.id], 0, raw + bytes(b.size - len(raw)))
        elif init["kind"] in ("file", "file_parts"):
            if data is None:
                raise PlanError(f"buffer {b.label} needs file bytes; load with the program data")
            parts = init["parts"] if init["kind"] == "file_parts" else [init]
            raw = b"".join(_file_range(data, p, b.label) for p in parts)
            if init.get("interleave") is not None:
                raw = interleave(raw, init["interleave"])
            if init.get("convert") == "u8_to_u32":
                raw = np.frombuffer(raw, np.uint8).astype(np.uint32).tobytes()
            elif init.get("convert") == "i64_to_i32":
                raw = narrow_i64(raw, b.label)
            if len(raw) < b.size:
                raw += bytes(b.size - len(raw))
            self.device.queue.write_buffer(self.buffers[b.id], 0, raw)
        else:
            raise PlanError(f"unknown buffer init {init['kind']!r}")

    def reset(self) -> None:
        """Zero the persistent state (KV caches): zeroed state is cleared on the device in
        one submit of its own (no host copy of the caches' bytes, and the next call's submit
        does not wait on an upload); other initial contents are written again."""
        enc = self.device.create_command_encoder()
        for i in self.plan.state:
            b = self.plan.buffers[i]
            if b.init is not None and b.init["kind"] == "zeros":
                enc.clear_buffer(self.buffers[i])
            else:
                self._initialise(b, None)
        self.device.queue.submit([enc.finish()])

    def poison(self, word: int = POISON_WORD) -> None:
        """Fill activation and output buffers with a NaN pattern (tests: catches unwritten
        elements)."""
        for b in self.plan.buffers:
            if b.role in ("activation", "output"):
                self.device.queue.write_buffer(
                    self.buffers[b.id], 0, np.full(b.size // 4, word, np.uint32).tobytes())

    def _input_bytes(self, arrays) -> list[bytes]:
        if len(arrays) != len(self.plan.inputs):
            raise InputError(f"the method takes {len(self.plan.inputs)} inputs, got "
                             f"{len(arrays)}")
        return [to_storage_bytes(a, s, f"input {i}")
                for i, (a, s) in enumerate(zip(arrays, self.plan.inputs))]

    def write_inputs(self, arrays) -> None:
        for raw, spec in zip(self._input_bytes(arrays), self.plan.inputs):
            self.device.queue.write_buffer(self.buffers[spec.buffer], 0, raw)

    def _readout(self, k: int | None):
        if k is None:
            return None
        if k not in self.readouts:
            raise InputError(f"the plan has readouts for k in {sorted(self.readouts)}, not {k}")
        return self.readouts[k]

    def _encode_call(self, enc) -> None:
        self._encode(enc, self.call_steps)

    def _finish(self, enc, readout):
        """Encode the readout (or the outputs' copies), submit once, read back."""
        import wgpu

        if readout is not None:
            spec, steps, st = readout
            self._encode(enc, steps)
            enc.copy_buffer_to_buffer(self.buffers[spec.buffer], 0, st, 0, spec.read_bytes)
            stagings = [st]
        else:
            for spec, st in zip(self.plan.outputs, self.staging):
                enc.copy_buffer_to_buffer(self.buffers[spec.buffer], 0, st, 0, st.size)
            stagings = self.staging
        self.device.queue.submit([enc.finish()])
        raws = []
        for st in stagings:
            st.map_sync(wgpu.MapMode.READ)
            try:
                raws.append(st.read_mapped(copy=True))
            finally:
                st.unmap()
        if readout is not None:
            return np.frombuffer(raws[0], np.uint32).copy()
        return [from_storage_bytes(raw, spec).copy() for raw, spec in zip(raws, self.plan.outputs)]

    def run(self, arrays, readout: int | None = None):
        """One call: its outputs, or (readout=k) the uint32 words of the plan's readout of
        k (k token ids, then k float32 logits as bits; only the id for k = 1)."""
        r = self._readout(readout)
        self.write_inputs(arrays)
        enc = self.device.create_command_encoder()
        self._encode_call(enc)
        return self._finish(enc, r)

    def run_calls(self, calls, readout: int | None = None):
        """Several calls in order in one submit (what `run` gives for the last one)."""
        import wgpu

        if not calls:
            raise InputError("run_calls needs at least one call")
        if len(calls) == 1:
            return self.run(calls[0], readout)
        r = self._readout(readout)
        raws = [self._input_bytes(c) for c in calls]
        size = sum(len(x) for call in raws for x in call)
        if self.input_ring is None or self.input_ring.size < size:
            if self.input_ring is not None:
                self.input_ring.destroy()
            self.input_ring = self.device.create_buffer(
                size=size, usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC)
        self.device.queue.write_buffer(self.input_ring, 0, b"".join(x for c in raws for x in c))
        enc = self.device.create_command_encoder()
        at = 0
        for call in raws:
            for raw, spec in zip(call, self.plan.inputs):
                enc.copy_buffer_to_buffer(self.input_ring, at, self.buffers[spec.buffer], 0,
                                          len(raw))
                at += len(raw)
            self._encode_call(enc)
        return self._finish(enc, r)

    def profile(self, arrays) -> list[tuple[int, float]]:
        """Seconds each dispatch takes, run one submit at a time (for `webpte bench
        --profile`; far slower than run())."""
        import time

        self.write_inputs(arrays)
        first = self.buffers[self.plan.outputs[0].buffer]

        def wait():  # a 4-byte read back waits for the queue to drain
            self.device.queue.read_buffer(first, 0, 4)

        wait()
        times = []
        for i, (d, bg) in enumerate(zip(self.plan.dispatches, self.bind_groups)):
            t = time.perf_counter()
            enc = self.device.create_command_encoder()
            cpass = enc.begin_compute_pass()
            cpass.set_pipeline(self.pipelines[d.kernel])
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(*d.workgroups)
            cpass.end()
            self.device.queue.submit([enc.finish()])
            wait()
            times.append((i, time.perf_counter() - t))
        return times

    def read_buffer(self, buffer_id: int) -> bytes:
        """Bytes of any plan buffer (tests and debugging; allocates a staging copy)."""
        return bytes(self.device.queue.read_buffer(self.buffers[buffer_id]))


def _file_range(data, part: dict, label: str) -> bytes:
    """The bytes of a file init (or one of its parts) from the file it names (`"file"`: 0
    the .pte, k the k-th data file; `data` one source or the list of them)."""
    src = file_source(data, part.get("file", 0), f"buffer {label}")
    end = part["offset"] + part["nbytes"]
    if end > len(src):
        raise PlanError(f"buffer {label} reads bytes up to {end} of a {len(src)}-byte file; "
                        f"plan and load with the same files")
    return bytes(src[part["offset"]: end])


def narrow_i64(raw: bytes, label: str) -> bytes:
    """int64 file bytes as int32 words; a value outside int32 is a PlanError, not a wrap."""
    wide = np.frombuffer(raw[: len(raw) // 8 * 8], "<i8")
    if wide.size and (wide.min() < -(1 << 31) or wide.max() >= 1 << 31):
        raise PlanError(f"buffer {label}: an int64 constant holds a value outside int32 "
                        f"({int(wide.min())}..{int(wide.max())}); webpte stores int64 as int32")
    return wide.astype("<i4").tobytes()
