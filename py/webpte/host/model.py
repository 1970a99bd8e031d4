"""A loaded model: decoder (+ vision) programs, embeddings, tokenizer, contract facts."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .embeddings import EmbeddingTable
from .files import ModelFiles, resolve_model_folder
from .prompt import IMAGE_TOKEN, ChatFormat
from .turn import make_contract, ring_of_meta


class Model:
    """Everything the host contract needs, checked at load."""

    def __init__(self, files: ModelFiles, *, backend: str = "webgpu",
                 limits: str | dict | None = None):
        from ..program import Program

        self.files = files
        self.backend = backend
        self.decoder = Program(files.decoder, backend=backend, limits=limits,
                               data=files.decoder_data)
        consts = {n: m.constant for n, m in self.decoder.program.methods.items()
                  if m.is_constant}
        embeds_in = self.decoder.plan.inputs[0]
        self.rows = int(embeds_in.shape[1])
        self.hidden = int(embeds_in.shape[2])
        if files.hidden_size and files.hidden_size != self.hidden:
            raise InputError(f"meta says hidden size {files.hidden_size}, the decoder takes "
                             f"{self.hidden}")
        self.max_context = int(consts.get("get_max_context_len") or self.decoder.plan.max_context)
        self.vocab = int(self.decoder.plan.outputs[0].shape[-1])
        self.embeddings = EmbeddingTable(files.embed_tokens, files.embed_scales, self.hidden)
        self.vision = (Program(files.vision, backend=backend, limits=limits,
                               data=files.vision_data)
                       if files.vision else None)
        # [height, width] of the pixel values the vision program takes, and the embedding
        # rows it gives per image (each replaces one <image> token of the prompt).
        self.image_size, image_rows = self._vision_shapes() if self.vision else (None, None)
        self.chat = ChatFormat(files.tokenizer, **({"image_rows": image_rows}
                                                   if image_rows else {}))
        ring = ring_of_meta(files.meta) if files.layout == "webpte" else None
        self.contract = make_contract(lambda t: self.chat.token_id(t, required=False),
                                      self.rows, self.max_context, files.sink_token,
                                      files.stop_tokens, ring)
        self.sink_id = self.contract.sink_id
        self.stop_ids = set(self.contract.stop_ids)
        self.image_id = self.chat.token_id(IMAGE_TOKEN, required=False)
        if self.vision is not None and self.image_id is None:
            raise InputError(f"model {files.name} has a vision program but its tokenizer has "
                             f"no {IMAGE_TOKEN} token to put the image embeddings at")

    def _vision_shapes(self) -> tuple[tuple[int, int], int]:
        """Check the vision program against the decoder: pixel values `[1, 3, H, W]` in,
        `[1, rows, hidden]` out."""
        plan = self.vision.plan
        where = f"vision program {self.files.vision.name}"
        if len(plan.inputs) != 1 or len(plan.outputs) != 1:
            raise InputError(f"{where} takes {len(plan.inputs)} inputs and gives "
                             f"{len(plan.outputs)} outputs; a vision program maps pixel values "
                             f"to image embeddings (one each)")
        pixels, embeds = plan.inputs[0], plan.outputs[0]
        ps, es = [int(d) for d in pixels.shape], [int(d) for d in embeds.shape]
        if pixels.dtype != "float32" or len(ps) != 4 or ps[:2] != [1, 3]:
            raise InputError(f"{where} takes {pixels.dtype}{ps}, not RGB pixel values "
                             f"float32[1, 3, H, W]")
        if len(es) != 3 or es[0] != 1 or es[2] != self.hidden:
            raise InputError(f"{where} gives {embeds.dtype}{es}; the decoder takes "
                             f"[1, rows, {self.hidden}] image embeddings")
        return (ps[2], ps[3]), es[1]

    @property
    def name(self) -> str:
        return self.files.name

    def session(self):
        from .session import Session

        return Session(self)


def load_model(folder: str | os.PathLike, *, verify: bool = True,
               backend: str = "webgpu", limits: str | dict | None = None) -> Model:
    """Validate a model folder (one error lists every problem) and load it on the GPU
    (`backend="reference"`: run it with webpte's numpy interpreter instead, slowly;
    `limits`: as `webpte.load`'s)."""
    return Model(resolve_model_folder(Path(folder), verify=verify), backend=backend,
                 limits=limits)


def logit_gaps(model: Model, prompt_ids: list[int], tokens: list[int],
               penalty: float = 1.0) -> list[float]:
    """Best minus runner-up score before each of `tokens` (a generation after `prompt_ids`),
    the model fed window by window from a zeroed cache; scores are the logits with the
    repetition `penalty` applied to the ids seen so far, as the Sampler does. A small gap
    marks a step where another backend may rightly pick another token. The cache is zeroed
    again after."""
    import numpy as np

    from .turn import decode_window_start, prefill_windows

    ids = list(prompt_ids)
    model.decoder.reset()

    def window(start: int) -> np.ndarray:
        embeds = model.embeddings(ids)
        (logits,) = model.decoder.run(embeds[None, start:start + model.rows],
                                      np.array([start], np.int64))
        return logits.reshape(-1, logits.shape[-1])[-1]

    logits = None
    for start in prefill_windows([], ids, model.contract)[1]:
        logits = window(start)
    gaps = []
    for step, token in enumerate(tokens):
        seen = sorted(set(ids))
        if penalty != 1.0:
            logits[seen] = np.where(logits[seen] > 0, logits[seen] / penalty,
                                    logits[seen] * penalty)
        top = np.sort(logits)[-2:]
        gaps.append(float(top[1] - top[0]))
        ids.append(token)
        if step + 1 < len(tokens):
            logits = window(decode_window_start(len(ids), model.contract))
    model.decoder.reset()
    return gaps
