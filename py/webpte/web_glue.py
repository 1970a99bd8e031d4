"""What the page's worker (web/worker.js) calls in Pyodide: read a program from byte ranges
the worker serves on demand and plan one method; say what a model folder holds; hold a
conversation's host-contract state (chat template, turn decisions, sampler). Imports neither
numpy, wgpu nor tokenizers.

The file stays in a JS ArrayBuffer; Python only asks for the ranges the reader needs (the
flatbuffer regions), so the weights never enter the wasm heap. Tokens and embeddings are the
worker's (JS); Python gets token ids and, per generated token, the logits of one row.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

from .errors import InputError, WebpteError
from .host.files import folder_manifest
from .host.prompt import IMAGE_TOKEN, ChatTemplate, Turn
from .host.sampling import Candidates, Sampler, SamplingOptions
from .host.turn import (
    Ring,
    RingSlots,
    decode_window_start,
    image_key,
    make_contract,
    prefill_windows,
    ring_of_meta,
    stop_reason,
)
from .preflight import plan_needs
from .program import _position_input, plan_method
from .pte import read_data_file, read_program

__all__ = ["ChatSession", "RangeSource", "autotune_candidates", "model_manifest", "plan_program",
           "preflight_program"]


class RangeSource:
    """A byte source of `size` bytes that supports `len()` and slicing, backed by
    `read(start, stop)` (in the page: a JS function returning a Uint8Array view).

    Counts the distinct bytes it hands out (`bytes_read`: a region read twice counts once),
    which shows what crossed into Python. `name` (a URL) names it in messages. Until
    `fingerprint()` is called, it hashes each range it hands out with its offset.
    """

    def __init__(self, size: int, read: Callable[[int, int], object], name: str | None = None):
        self.size = int(size)
        self._read = read
        self.name = name if isinstance(name, str) else None
        self._ranges: list[tuple[int, int]] = []
        self._hash = hashlib.sha256(self.size.to_bytes(8, "little"))
        self._digest: str | None = None

    def fingerprint(self) -> str:
        """SHA-256 of the size and the ranges read so far (offsets and bytes, in order); later
        reads no longer change it."""
        if self._digest is None:
            self._digest = self._hash.hexdigest()
        return self._digest

    @property
    def bytes_read(self) -> int:
        total, end = 0, 0
        for a, b in sorted(self._ranges):
            if b > end:
                total += b - max(a, end)
                end = b
        return total

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                raise ValueError("RangeSource slices take step 1")
            if stop <= start:
                return b""
            raw = self._read(start, stop)
            raw = raw.to_bytes() if hasattr(raw, "to_py") else bytes(raw)  # a JsProxy
            self._ranges.append((start, start + len(raw)))
            if self._digest is None:
                self._hash.update(start.to_bytes(8, "little") + len(raw).to_bytes(8, "little"))
                self._hash.update(raw)
            return raw
        index = range(self.size)[key]
        return self[index:index + 1][0]


def _listed(data) -> list:
    """The data files given (in the page a JS array; JS null arrives as a JsNull) as a list."""
    return [] if data is None or not hasattr(data, "__iter__") else list(data)


def _data_files(data) -> list:
    """The external data files (`.ptd`) given as a list of `RangeSource`s (in the page a JS
    array; JS null arrives as a JsNull)."""
    return [read_data_file(s, getattr(s, "name", None) or f"data file {k}")
            for k, s in enumerate(_listed(data), 1)]


def _error(e: WebpteError) -> str:
    detail = {k: getattr(e, k) for k in ("key", "file") if hasattr(e, k)}
    return json.dumps({"error": {"name": type(e).__name__, "message": str(e), **detail,
                                 "ops": list(getattr(e, "ops", [])),
                                 "problems": list(getattr(e, "problems", []))}})


def _answer(fn: Callable[[], object]) -> str:
    """`{"ok": fn()}` as JSON, or `{"error": {...}}` for a webpte error."""
    try:
        return json.dumps({"ok": fn()})
    except WebpteError as e:
        return _error(e)


def plan_program(source, method: str = "forward", features=(), fusion: str = "all",
                 input_shapes: str | None = None, limits: str | None = None,
                 data=None) -> str:
    """Plan `method` of the program in `source` (bytes or a `RangeSource`) for a device with
    the WGSL language `features` (in the page: `navigator.gpu.wgslLanguageFeatures`), with
    `fusion` "all", "elementwise" or "none" (webpte.program.plan_method). `input_shapes`
    (JSON list of dims per input) specializes a method exported with dynamic shapes.
    `limits` (JSON object of limit caps, webpte.limits names) plans within them. `data`: the
    external data files (`RangeSource`s of `.ptd` files) the program keeps constants in.

    Returns JSON: `{"plan": Plan, "position_input": [input index, rows] | null,
    "dynamic": bool (some input takes smaller dims), "bytes_read": int, "plan_ms": float,
    "fingerprint": str}`, or `{"error": {"name", "message", "ops"}}` for a webpte error (the
    worker raises it as the JS error class of the same name). `fingerprint` names the program
    and its data files by what the reader read of them (header, flatbuffer, graphs; not the
    weights it does not read): the same for every planner hint, so the page's autotune keys
    its choice by it without reading a streamed file whole.
    """
    t0 = time.perf_counter()
    try:
        sources = _listed(data)    # a JS array is walked once, here
        prog = read_program(source, _data_files(sources))
        fingerprint = _fingerprint([source, *sources])
        if method not in prog.methods:
            raise InputError(f"the program has no method {method!r}; it has "
                             f"{sorted(prog.methods)}")
        shapes = None
        if isinstance(input_shapes, str):      # JS null arrives as a JsNull, not None
            shapes = json.loads(input_shapes)
            if not (isinstance(shapes, list) and all(
                    isinstance(d, list) and all(type(x) is int for x in d) for d in shapes)):
                raise InputError("input_shapes must be a list of dims lists")
        plan = plan_method(prog, method, frozenset(str(f) for f in features), str(fusion),
                           input_shapes=shapes, limits=_limits(limits))
        dynamic = any(io.dynamic for io in prog.method(method).inputs)
    except WebpteError as e:
        return _error(e)
    plan_ms = (time.perf_counter() - t0) * 1e3
    pos = _position_input(plan)
    return ('{"plan":' + plan.to_json()
            + f',"position_input":{json.dumps(list(pos) if pos else None)}'
            + f',"dynamic":{json.dumps(dynamic)}'
            + f',"bytes_read":{getattr(source, "bytes_read", len(source))}'
            + f',"plan_ms":{plan_ms:.3f}'
            + f',"fingerprint":{json.dumps(fingerprint)}}}')


def _fingerprint(sources) -> str:
    """One SHA-256 over the fingerprints of a program's files (RangeSource.fingerprint; a
    file given as bytes is hashed whole)."""
    h = hashlib.sha256()
    for s in sources:
        h.update((s.fingerprint() if isinstance(s, RangeSource)
                  else hashlib.sha256(bytes(s)).hexdigest()).encode())
    return h.hexdigest()


def autotune_candidates(kind: str) -> str:
    """What the page's autotune (web/autotune.js) measures on an adapter of `kind` ("CPU" or
    "GPU"), from webpte.autotune: `{"ok": {"hints": [planner hints per candidate, joined by
    "+"], "families": [kernel families that mark a plan worth tuning], "calls": timed calls
    per candidate, "max_bytes": the largest plan tuned}}`."""
    from .autotune import CALLS, CANDIDATES, DECODE_FAMILIES, MAX_BYTES
    from .planner.hints import variant_features

    return _answer(lambda: {"hints": ["+".join(sorted(variant_features((), v))) for v in
                                      CANDIDATES["CPU" if str(kind) == "CPU" else "GPU"]],
                            "families": list(DECODE_FAMILIES), "calls": CALLS,
                            "max_bytes": MAX_BYTES})


def _limits(text) -> dict | None:
    """A JSON text of limit caps from the page (JS null arrives as a JsNull, not None)."""
    if not isinstance(text, str):
        return None
    caps = json.loads(text)
    if not isinstance(caps, dict):
        raise InputError("limits must be an object of limit names to numbers")
    return caps


def preflight_program(source, method: str = "forward", features=(), fusion: str = "all",
                      limits: str | None = None, data=None) -> str:
    """What the plan of `method` needs from the device (webpte.preflight.plan_needs), made from
    `source` (a `RangeSource` over the file's byte ranges: in the page they are fetched on
    demand before any weight byte is downloaded). JSON `{"ok": {"needs": {limit: value},
    "bytes_read": int, "file_size": int, "plan_ms": float, "planned": {"plan": Plan JSON text,
    "position_input", "dynamic"}}}` or `{"error": {...}}`; the load uses `planned` for the
    downloaded file of that size instead of planning it again."""
    def run():
        t0 = time.perf_counter()
        prog = read_program(source, _data_files(data))
        plan = plan_method(prog, str(method), frozenset(str(f) for f in features), str(fusion),
                           limits=_limits(limits))
        pos = _position_input(plan)
        planned = {"plan": plan.to_json(), "position_input": list(pos) if pos else None,
                   "dynamic": any(io.dynamic for io in prog.method(str(method)).inputs)}
        return {"needs": plan_needs(plan), "bytes_read": getattr(source, "bytes_read", len(source)),
                "file_size": len(source), "plan_ms": (time.perf_counter() - t0) * 1e3,
                "planned": planned}
    return _answer(run)


def model_manifest(meta_name: str, meta_text: str | None, where: str = "the model folder") -> str:
    """The files of a model folder and their pinned sha256 values (webpte.host.files), from
    its meta file: `webpte_model.json` (text in `meta_text`) or `vlm_meta.json` (SmolVLM);
    `ring`: the sliding layers' ring cache it declares (`{window, rows}`) or null."""
    def run():
        meta = None
        if meta_name != "vlm_meta.json" and meta_text is not None:
            try:
                meta = json.loads(meta_text)
            except (ValueError, RecursionError) as e:   # RecursionError: nested too deep
                raise InputError(f"{where}: {meta_name} is not valid JSON ({e}); fix or "
                                 f"re-download it") from e
        out = folder_manifest(meta_name, meta, where)
        ring = ring_of_meta(meta, where) if isinstance(meta, dict) else None
        out["ring"] = vars(ring) if ring else None
        return out
    return _answer(run)


class _Turn:
    """The turn being generated: its conversation, prompt ids and sampling state."""

    def __init__(self, turns, ids, images, reuse, starts, sampler, max_new_tokens):
        self.turns, self.ids, self.images, self.reuse = turns, ids, images, reuse
        self.starts = starts
        self.sampler, self.max_new_tokens = sampler, max_new_tokens
        self.prefilled = False
        self.generated: list[int] = []
        self.pending: int | None = None   # sampled, not yet fed through the decoder
        self.readout: int | None = None   # the device readout step() gets (None: the logits)


class ChatSession:
    """One conversation in the page, mirroring webpte.host.session.Session with the same
    decisions (webpte.host.turn, Sampler, ChatTemplate); the worker tokenizes, embeds and runs
    the windows. Every method answers JSON `{"ok": ...}` or `{"error": {...}}`.

    `token_id(text)` looks a token up in the worker's tokenizer (a negative id: not there).
    Images are known by their content keys (`image_key`); the worker keeps their vision rows.
    """

    def __init__(self, manifest_json: str, config_text: str, token_id, rows: int,
                 max_context: int):
        self.manifest = json.loads(manifest_json)
        self.config_text = config_text
        self.rows, self.max_context = int(rows), int(max_context)
        self._token_id = token_id
        self.chat = self.contract = self.image_id = None
        self.turns: list[Turn] = []
        self.cached: list[int] = []   # token id at each position whose K/V is valid
        self.cached_images: list[str] = []  # keys of the images among those positions
        self.slots: RingSlots | None = None  # what the ring cache holds (a ring decoder)
        self.turn: _Turn | None = None

    def token_id(self, token: str) -> int | None:
        tid = self._token_id(token)
        return None if tid is None or int(tid) < 0 else int(tid)

    def setup(self) -> str:
        """Check the folder's facts against the tokenizer; `{sink_id, stop_ids, image_id,
        image_rows}`."""
        def run():
            try:
                config = json.loads(self.config_text)
            except (ValueError, RecursionError) as e:
                raise InputError(f"tokenizer_config.json is not valid JSON ({e})") from e
            if not isinstance(config, dict):
                raise InputError("tokenizer_config.json is not a JSON object")
            self.image_id = self.token_id(IMAGE_TOKEN)
            self.chat = ChatTemplate(config, has_images=self.image_id is not None)
            m = self.manifest
            ring = Ring(**m["ring"]) if m.get("ring") else None
            self.contract = make_contract(self.token_id, self.rows, self.max_context,
                                          m["sink_token"], m["stop_tokens"], ring)
            self.slots = self._fresh_slots()
            return {"sink_id": self.contract.sink_id, "stop_ids": sorted(self.contract.stop_ids),
                    "image_id": self.image_id, "image_rows": self.chat.image_rows}
        return _answer(run)

    def _fresh_slots(self) -> RingSlots | None:
        ring = self.contract.ring
        return RingSlots(ring.rows) if ring else None

    def image_key(self, data, height: int, width: int) -> str:
        """`{"ok": key}`: the identity of an image the page sent (`data`: its RGBA bytes at
        the vision program's size), which turns hold and reuse compares."""
        raw = data.to_bytes() if hasattr(data, "to_bytes") else bytes(data)  # a JsProxy
        return _answer(lambda: image_key(raw, (int(height), int(width), 4)))

    def set_history(self, history_json: str) -> str:
        """The conversation before the next user message, as a chat request gives it:
        `[{role, text, image: key | null}]`. The cache keeps the longest prefix of its rows
        that this conversation renders to (next `begin`)."""
        def run():
            try:
                history = json.loads(history_json)
                turns = [Turn(str(m["role"]), str(m["text"]), m.get("image") is not None,
                              None if m.get("image") is None else str(m["image"]))
                         for m in history]
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
                raise InputError(f"the chat history is not a list of {{role, text, image}}: "
                                 f"{e}") from e
            self.turns = turns
        return _answer(run)

    def render(self, question: str, image: bool = False) -> str:
        """The prompt text of the conversation so far plus this question."""
        return _answer(lambda: self.chat.render(
            self.turns + [Turn("user", str(question), bool(image))], add_generation_prompt=True))

    def begin(self, question: str, image: str | bool | None, ids, options_json: str) -> str:
        """Start a turn (about the image of key `image`; None or False: none) whose prompt
        tokenizes to `ids`: `{reuse, starts, images}` (positions kept from earlier turns,
        window starts to feed, the keys of the prompt's images in order). Raises
        ContextFullError, or InputError when the prompt does not start with the attention
        sink."""
        def run():
            try:   # options and ids come from the page's caller: any JSON, any list
                opts = json.loads(options_json)
                if not isinstance(opts, dict):
                    raise TypeError(f"options are a {type(opts).__name__}, not an object")
                sampling = SamplingOptions(
                    temperature=float(opts.get("temperature", 0.0)),
                    top_k=int(opts.get("top_k", 0)), top_p=float(opts.get("top_p", 1.0)),
                    repetition_penalty=float(opts.get("repetition_penalty", 1.0)),
                    seed=None if opts.get("seed") is None else int(opts["seed"]))
                max_new = int(opts.get("max_new_tokens", 256))
                ids_list = [int(i) for i in (ids.to_py() if hasattr(ids, "to_py") else ids)]
            except (ValueError, TypeError, OverflowError, RecursionError) as e:
                raise InputError(f"generate(): {e}") from e
            if max_new < 0:
                raise InputError(f"maxNewTokens must be >= 0, got {max_new}")
            if not (image is None or image is False or isinstance(image, str)):
                raise InputError("begin() takes the turn's image key (ChatSession.image_key) "
                                 f"or None, not {image!r:.40}")
            key = image or None
            turns = self.turns + [Turn("user", str(question), key is not None, key)]
            keys = [t.image_key for t in turns if t.image]
            if any(k is None for k in keys):
                raise InputError("a turn of the conversation holds an image without its key")
            reuse, starts = prefill_windows(self.cached, ids_list, self.contract, self.slots,
                                            cached_images=self.cached_images, images=keys,
                                            image_id=self.image_id)
            self.turn = _Turn(turns, ids_list, keys, reuse, starts, Sampler(sampling), max_new)
            # The decoder's device readouts (k of each) the worker may run instead of
            # reading the logits back: the sampler picks the one that is exact, or none.
            readouts = [int(k) for k in opts.get("readouts", [])]
            self.turn.readout = self.turn.sampler.readout(readouts)
            # Rows past the prefix are rewritten from here on; the prefix's images are `keys`'.
            self.cached, self.cached_images = self.cached[:reuse], keys
            return {"reuse": reuse, "starts": starts, "images": keys,
                    "readout": self.turn.readout}
        return _answer(run)

    def prefilled(self) -> str:
        """The prompt's windows ran: the turn joins the conversation."""
        t = self.turn
        t.prefilled = True
        self.turns, self.cached = t.turns, list(t.ids)
        if self.slots is not None:
            for s in t.starts:
                self.slots.write(s, self.rows)
        return _answer(lambda: None)

    def step(self, logits) -> str:
        """The next decision given the newest row's logits (or the words of the readout
        `begin` chose): `{"token", "start"}` (emit the token, feed the window at start) or
        `{"stop": reason}`."""
        t = self.turn
        if t.pending is not None:   # the previous token went through the decoder
            self._fed_pending(t)
            self.cached.append(t.pending)
            t.pending = None
        c = self.contract
        reason = stop_reason(None, len(t.generated), len(self.cached), t.max_new_tokens, c)
        if reason is None:
            if hasattr(logits, "to_memoryview"):   # a JS Float32Array: one copy into the heap
                logits = logits.to_memoryview()
            if t.readout is not None:   # the words of the readout `begin` chose
                logits = Candidates.from_words(logits, t.readout)
            token = t.sampler(logits, self.cached)
            reason = stop_reason(token, len(t.generated), len(self.cached), t.max_new_tokens, c)
        if reason is not None:
            return json.dumps({"ok": {"stop": reason}})
        t.generated.append(token)
        t.pending = token
        return json.dumps({"ok": {"token": token,
                                  "start": decode_window_start(len(self.cached) + 1, c)}})

    def _fed_pending(self, t: _Turn) -> None:
        """The window of the pending token (at position len(cached)) ran."""
        if self.slots is not None:
            self.slots.write(decode_window_start(len(self.cached) + 1, self.contract), self.rows)

    def finish(self, answer: str) -> str:
        """End the turn: the answer (decoded by the worker) joins the conversation. A turn
        stopped before its prompt was fed leaves the conversation as it was (and the ring's
        slots unknown: some of its windows may have run)."""
        t, self.turn = self.turn, None
        if t is not None and t.prefilled:
            self.turns = t.turns + [Turn("assistant", str(answer).strip())]
            if t.pending is not None:
                # Its window may have run: count its rows as written. The token is not
                # cached, so no later turn reuses that position before feeding it again.
                self._fed_pending(t)
        elif t is not None:
            self.slots = self._fresh_slots()
        return _answer(lambda: None)

    def reset(self) -> str:
        self.turns, self.cached, self.cached_images, self.turn = [], [], [], None
        if self.contract is not None:
            self.slots = self._fresh_slots()
        return _answer(lambda: None)
