"""A loaded model: decoder (+ vision) programs, embeddings, tokenizer, contract facts."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .embeddings import EmbeddingTable
from .files import ModelFiles, resolve_model_folder
from .prompt import IMAGE_TOKEN, ChatFormat
from .turn import make_contract


class Model:
    """Everything the host contract needs, checked at load."""

    def __init__(self, files: ModelFiles):
        from ..program import Program

        self.files = files
        self.decoder = Program(files.decoder)
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
        self.chat = ChatFormat(files.tokenizer)
        self.contract = make_contract(lambda t: self.chat.token_id(t, required=False),
                                      self.rows, self.max_context, files.sink_token,
                                      files.stop_tokens)
        self.sink_id = self.contract.sink_id
        self.stop_ids = set(self.contract.stop_ids)
        self.image_id = self.chat.token_id(IMAGE_TOKEN, required=False)
        self.vision = Program(files.vision) if files.vision else None

    @property
    def name(self) -> str:
        return self.files.name

    def session(self):
        from .session import Session

        return Session(self)


def load_model(folder: str | os.PathLike, *, verify: bool = True) -> Model:
    """Validate a model folder (one error lists every problem) and load it on the GPU."""
    return Model(resolve_model_folder(Path(folder), verify=verify))
