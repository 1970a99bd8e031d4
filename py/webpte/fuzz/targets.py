"""What is fuzzed: each target makes a mutant from its seeds and runs the code under test on
it. `run` returns normally for a valid result and lets a typed error (WebpteError) or
anything else propagate; the runner sorts them. A broken invariant on a valid result
(a plan that does not survive its own JSON, a model file outside its folder) raises
`Finding`, which the runner counts as a crash.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

from ..errors import WebpteError
from .flatbuf import Site, program_sites
from .mutate import _ESCAPES, mutate_json, mutate_program

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
PROGRAM_GLOBS = (
    "*.pte", "op_catalog/*.pte", "tiny_vlm/*.pte", "gemma4/*.pte", "dynamic/*.pte",
)
MODEL_FOLDER = FIXTURES / "tiny_vlm"
# Feature sets a page may report (kernel variants depend on them).
FEATURE_SETS = (frozenset(), frozenset({"packed_4x8_integer_dot_product"}))
FUSIONS = ("all", "elementwise", "none")


class Finding(Exception):
    """A valid-looking result that breaks an invariant (counted as a crash)."""


def committed_programs(fixtures: Path = FIXTURES) -> list[Path]:
    return sorted(p for g in PROGRAM_GLOBS for p in fixtures.glob(g))


class PteTarget:
    """`read_program` + `plan_method` of every method (and of "forward") over mutated
    committed programs; one mutant in ten goes through the page's `plan_program` instead.
    A plan must survive `Plan.from_json(plan.to_json())`."""

    name = "pte"

    def __init__(self, paths: list[Path]):
        if not paths:
            raise FileNotFoundError("no committed .pte programs to fuzz")
        self.paths = paths
        self.data = [p.read_bytes() for p in paths]
        self._sites: dict[int, list[Site]] = {}

    def sites(self, i: int) -> list[Site]:
        if i not in self._sites:
            self._sites[i] = program_sites(self.data[i])
        return self._sites[i]

    def mutant(self, rng: random.Random) -> tuple[bytes, str, list[str]]:
        i = rng.randrange(len(self.data))
        data, steps = mutate_program(self.data[i], self.sites(i), self.data, rng)
        return data, str(self.paths[i].relative_to(FIXTURES.parent.parent)), steps

    def run(self, data: bytes, rng: random.Random) -> str | None:
        from ..plan import Plan
        from ..program import plan_method
        from ..pte import read_program
        from ..web_glue import plan_program

        features, fusion = rng.choice(FEATURE_SETS), rng.choice(FUSIONS)
        if rng.random() < 0.1:
            answer = json.loads(plan_program(data, "forward", sorted(features), fusion))
            return answer["error"]["name"] if "error" in answer else None
        prog = read_program(data)
        typed = None
        for name in sorted({"forward", *prog.methods}):
            m = prog.methods.get(name)
            if m is not None and m.is_constant:
                continue
            try:
                plan = plan_method(prog, name, features, fusion)
            except WebpteError as e:
                typed = typed or e
                continue
            if len(plan.dispatches) <= 64:   # the big plans' JSON costs more than planning
                again = Plan.from_json(plan.to_json())
                if again.to_json() != plan.to_json():
                    raise Finding(f"plan of {name!r} changes through its JSON")
        if typed is not None:
            raise typed
        return None


class PlanJsonTarget:
    """`Plan.from_json` over mutated plans of the small committed programs (the page also
    takes a plan from outside: `loadProgram(bytes, {plan})`)."""

    name = "plan"

    def __init__(self, paths: list[Path]):
        from ..program import plan_method
        from ..pte import read_program

        self.seeds = []
        for p in paths:
            if p.stat().st_size > 16384:   # small programs: their plans are a few KiB
                continue
            try:
                prog = read_program(p.read_bytes())
                self.seeds.append((p.name, plan_method(prog, "forward").to_json()))
            except WebpteError:
                continue

    def mutant(self, rng: random.Random) -> tuple[str, str, list[str]]:
        name, text = rng.choice(self.seeds)
        mutant, steps = mutate_json(text, rng, ["f32", "i32", "u8", "file", "file_parts", "words",
                                                "zeros", "u8_to_u32", "state", "float32",
                                                "int64"])
        return mutant, f"plan of {name}", steps

    def run(self, text: str, rng: random.Random) -> str | None:
        from ..plan import Plan

        plan = Plan.from_json(text)
        if Plan.from_json(plan.to_json()).to_json() != plan.to_json():
            raise Finding("an accepted plan changes through its JSON")
        return None


class FolderTarget:
    """`resolve_model_folder` (and the page's `folder_manifest` / `model_manifest`) over a
    copy of tests/fixtures/tiny_vlm with a mutated webpte_model.json. Whatever is accepted
    must stay inside the folder."""

    name = "folder"

    def __init__(self, folder: Path = MODEL_FOLDER):
        self.tmp = Path(tempfile.mkdtemp(prefix="webpte-fuzz-"))
        self.folder = self.tmp / "model"
        shutil.copytree(folder, self.folder)
        # Decoys next to the folder: an escape that finds them is not refused by a missing file.
        shutil.copytree(folder, self.tmp / "x")
        (self.tmp / "etc").mkdir()
        self.seed = (folder / "webpte_model.json").read_text()

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mutant(self, rng: random.Random) -> tuple[str, str, list[str]]:
        text, steps = mutate_json(self.seed, rng, _ESCAPES + ["../x/decoder_q8.pte", "../x",
                                                              "../model/decoder_q8.pte"])
        return text, "tiny_vlm/webpte_model.json", steps

    def run(self, text: str, rng: random.Random) -> str | None:
        from ..host.files import META_NAME, confined_name, folder_manifest, resolve_model_folder
        from ..web_glue import model_manifest

        answer = json.loads(model_manifest(META_NAME, text, "fuzz"))
        typed = _error(json.dumps(answer))
        if typed is None:
            for f in answer["ok"]["files"]:
                if confined_name(f["name"], "file") is not None:
                    raise Finding(f"model_manifest accepted the file name {f['name']!r}")
        (self.folder / META_NAME).write_bytes(text.encode("utf-8", "surrogatepass"))
        files = resolve_model_folder(self.folder, verify=rng.random() < 0.5)
        root = self.folder.resolve()
        for key in ("decoder", "vision", "embed_tokens", "embed_scales", "tokenizer"):
            path = getattr(files, key)
            if path is not None and not Path(path).resolve().is_relative_to(root):
                raise Finding(f"resolve_model_folder accepted {key} = {path} outside the folder")
        folder_manifest(META_NAME, json.loads(text))
        return typed


class GlueTarget:
    """The worker protocol's Python side (web_glue): `model_manifest` with any meta name and
    text, and a ChatSession's setup/render/begin/step/finish with mutated
    tokenizer_config.json, generate() options and token ids. Every call answers JSON."""

    name = "glue"

    def __init__(self, folder: Path = MODEL_FOLDER):
        from ..host.files import META_NAME
        from ..web_glue import model_manifest

        tok = json.loads((folder / "tokenizer" / "tokenizer.json").read_text())
        vocab = dict(tok.get("model", {}).get("vocab", {}))
        vocab.update({t["content"]: t["id"] for t in tok.get("added_tokens", [])})
        self.vocab = vocab
        self.manifest = json.dumps(json.loads(model_manifest(
            META_NAME, (folder / META_NAME).read_text()))["ok"])
        self.config = (folder / "tokenizer" / "tokenizer_config.json").read_text()
        self.options = json.dumps({"temperature": 0.7, "top_k": 5, "top_p": 0.9,
                                   "repetition_penalty": 1.1, "seed": 3, "max_new_tokens": 4})

    def mutant(self, rng: random.Random) -> tuple[str, str, list[str]]:
        which = rng.choice(["options", "options", "config", "ids", "meta"])
        seed = {"options": self.options, "config": self.config, "meta": self.options,
                "ids": json.dumps([1, 2, 3])}[which]
        text, steps = mutate_json(seed, rng)
        return json.dumps({"which": which, "text": text}), f"glue {which}", steps

    def run(self, message: str, rng: random.Random) -> str | None:
        from ..web_glue import ChatSession, model_manifest

        m = json.loads(message)
        which, text = m["which"], m["text"]
        if which == "meta":
            meta_name = rng.choice(["webpte_model.json", "vlm_meta.json", "", "x.json"])
            return _error(model_manifest(meta_name, text))
        session = ChatSession(self.manifest, text if which == "config" else self.config,
                              lambda t: self.vocab.get(t, -1), 8, 64)
        for call in (session.setup, lambda: session.render("hi", image=rng.random() < 0.3)):
            if (err := _error(call())) is not None:
                return err
        ids = [self.vocab.get("<|im_start|>", 0), 5, 6]
        if which == "ids":
            try:   # the page's caller passes any value as ids
                ids = json.loads(text)
            except (ValueError, RecursionError):
                ids = text
            if not isinstance(ids, (list, str)):
                ids = [ids]
        options = text if which == "options" else self.options
        if (err := _error(session.begin("hello", False, ids, options))) is not None:
            return err
        session.prefilled()
        logits = [rng.uniform(-5, 5) for _ in range(len(self.vocab))]
        for _ in range(3):
            answer = session.step(logits)
            if (err := _error(answer)) is not None:
                return err
            if "stop" in json.loads(answer)["ok"]:
                break
        return _error(session.finish("answer"))


def _error(answer: str) -> str | None:
    """The error name of a glue answer, None for "ok"; anything else is a Finding."""
    d = json.loads(answer)
    if not isinstance(d, dict) or not ("ok" in d or "error" in d):
        raise Finding(f"glue answered {answer[:80]!r}")
    return d["error"]["name"] if "error" in d else None
