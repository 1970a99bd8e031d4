"""`webpte chat`: stream answers from a model folder in the terminal."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .errors import WebpteError
from .limits import add_limits_argument


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "webpte" / "config.json"


def default_model() -> str:
    """The configured model folder (WEBPTE_MODEL or the config file), else "smollm2"."""
    if os.environ.get("WEBPTE_MODEL"):
        return os.environ["WEBPTE_MODEL"]
    path = config_path()
    if path.is_file():
        try:
            model = json.loads(path.read_text()).get("model")
        except ValueError as e:
            raise WebpteError(f"{path} is not valid JSON: {e}") from e
        if model:
            return model
    return "smollm2"


def resolve_model(name: str) -> Path:
    if name == "smollm2":
        from .build.smollm2 import ensure_smollm2

        return ensure_smollm2()
    return Path(name)


def add_parser(sub) -> None:
    c = sub.add_parser("chat", help="chat with a model folder (streams the answer)")
    c.add_argument("question", nargs="?", help="ask once; without it, an interactive chat")
    c.add_argument("--model", default=None,
                   help="model folder, or 'smollm2' (built offline on first use); default: "
                        "$WEBPTE_MODEL, the config file's \"model\", else smollm2")
    c.add_argument("--image", help="an image file for the question (vision models)")
    c.add_argument("--max-new-tokens", type=int, default=256)
    c.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    c.add_argument("--top-k", type=int, default=0)
    c.add_argument("--top-p", type=float, default=1.0)
    c.add_argument("--repetition-penalty", type=float, default=1.0)
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--backend", choices=("webgpu", "reference"), default="webgpu",
                   help="webgpu (default) or reference: webpte's numpy interpreter (CPU, slow)")
    add_limits_argument(c)
    c.add_argument("--save-default", action="store_true",
                   help="remember --model as the default in the config file")
    c.set_defaults(func=cmd_chat)


def _answer(session, question, image, args) -> None:
    from .host.sampling import SamplingOptions

    opts = SamplingOptions(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                           repetition_penalty=args.repetition_penalty, seed=args.seed)
    for piece in session.generate(question, image, max_new_tokens=args.max_new_tokens,
                                  sampling=opts):
        sys.stdout.write(piece)
        sys.stdout.flush()
    s = session.stats
    sys.stdout.write("\n")
    extra = f", vision {s.vision_s:.2f} s" if s.vision_s else ""
    print(f"[{s.prompt_rows} prompt rows ({s.reused_rows} reused, {s.computed_rows} computed), "
          f"{s.new_tokens} new tokens, prefill {s.prefill_tokens_per_s:.1f} tok/s, "
          f"decode {s.decode_tokens_per_s:.2f} tok/s{extra}, stop: {s.stop_reason}]",
          file=sys.stderr)


def cmd_chat(args) -> int:
    from .host import load_model

    name = args.model or default_model()
    if args.save_default:
        if not args.model:
            raise WebpteError("--save-default needs --model")
        path = config_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"model": str(Path(args.model).resolve())
                                    if args.model != "smollm2" else "smollm2"}))
    folder = resolve_model(name)
    print(f"loading {folder} ...", file=sys.stderr)
    model = load_model(folder, backend=args.backend, limits=args.limits)
    session = model.session()
    if args.question:
        _answer(session, args.question, args.image, args)
        return 0
    print(f"{model.name}: type a question (/reset starts over, /image PATH attaches an "
          f"image, empty line quits)", file=sys.stderr)
    image = args.image
    while True:
        try:
            line = input("> ").strip()
        except EOFError:
            break
        if not line:
            break
        if line == "/reset":
            session.reset()
            continue
        if line.startswith("/image "):
            image = line[7:].strip()
            continue
        try:
            _answer(session, line, image, args)
        except WebpteError as e:
            print(f"error: {e}", file=sys.stderr)
        image = None
    return 0
