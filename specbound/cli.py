"""The ``specbound`` command line.

``specbound models``
    The embedded model and the draft kinds, each with its measured 1 - TV against the target
    on a few fixed real prompts (``--json`` for scripts).
``specbound generate "prompt" --decoder mpfr --B 4 --L 4 --key 42 [--draft early_exit:20]``
    The generated text and one summary line (AATPS, tokens/s, watermark p-value).
``specbound detect --key 42 [FILE|-]``
    The watermark detection result for a text (the tokenizer and the key only).

Commands are registered in :data:`COMMANDS` as (help, add_arguments, run) triples; each
``run(args)`` returns the exit status.  The decoders' commands (``generate``, ``detect``,
``log``) register the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["main", "COMMANDS", "build_parser"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, its argument setup and its action."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, add_arguments):
    """Register ``run`` as the action of subcommand ``name``."""

    def deco(run):
        COMMANDS[name] = Command(help, add_arguments, run)
        return run

    return deco


def _model_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that loads a model pair."""
    g = p.add_argument_group("model")
    g.add_argument("--target", default="embedded",
                   help="'embedded' (default), a Hugging Face model id, a folder or a .gguf file")
    g.add_argument("--device", default=None, help="torch device (default: CUDA if available)")
    g.add_argument("--dtype", default=None, help="weights' dtype (default: the checkpoint's)")
    g.add_argument("--temperature", type=float, default=1.0, help="shared temperature")
    g.add_argument("--top-k", type=int, default=None, help="shared top-k (default: none)")
    g.add_argument("--top-p", type=float, default=None, help="shared top-p (default: none)")
    g.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is faster on a busy "
                        "machine)")


def _set_threads(args) -> None:
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"threads: must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)


# ----------------------------------------------------------------------------- models

PROMPT_SEED = 0


def _models_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--drafts", nargs="+", metavar="SPEC", default=None,
                   help="drafts to measure (default: temperature:0.5 temperature:1.5 "
                        "early_exit:<2/3 of the layers> quantized:4 quantized:3 quantized:2)")
    p.add_argument("--prompts", type=int, default=2, metavar="N",
                   help="prompts per set (HumanEval and ShareGPT, seed 0; default 2)")
    p.add_argument("--max-tokens", type=int, default=64, metavar="T",
                   help="tokens per prompt (every prefix is a context; default 64)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def default_drafts(n_layers: int) -> list[str]:
    """The drafts ``specbound models`` measures for a target with ``n_layers`` layers."""
    k = max(1, min(n_layers, round(2 * n_layers / 3)))
    return ["temperature:0.5", "temperature:1.5", f"early_exit:{k}", "quantized:4",
            "quantized:3", "quantized:2"]


_SYNTAX = {"temperature": "temperature:T", "early_exit": "early_exit:K",
           "quantized": "quantized:BITS[:GROUP]", "model": "model:ID_OR_PATH"}


def _models_run(args: argparse.Namespace) -> int:
    import importlib.metadata

    from specbound import llm
    from specbound.llm import _loading
    from specbound.llm.drafts import _DESCRIPTIONS, DRAFT_KINDS, _layer_path, parse_draft

    specs = [str(parse_draft(d)) for d in args.drafts] if args.drafts else None
    _set_threads(args)
    texts = (llm.prompts("humaneval", args.prompts, seed=PROMPT_SEED)
             + llm.prompts("sharegpt", args.prompts, seed=PROMPT_SEED))
    pair = llm.load_pair(args.target, draft="temperature:1", device=args.device,
                         dtype=args.dtype, temperature=args.temperature, top_k=args.top_k,
                         top_p=args.top_p)
    info = pair.load_info["target"]
    n_layers = len(_layer_path(pair.target)[1])
    if specs is None:
        specs = default_drafts(n_layers)
    rows = []
    progress = None
    if not args.quiet:
        from tqdm.auto import tqdm

        progress = tqdm(total=len(specs), desc="measuring drafts", file=sys.stderr)
    for spec in specs:
        prof = pair.acceptance_profile(texts, [spec], B=1, schemes=(), max_tokens=args.max_tokens)
        s = prof.summary.iloc[0]
        rows.append({"draft": spec, "kind": spec.split(":", 1)[0],
                     "one_minus_tv": float(s["one_minus_tv"]),
                     "stderr": float(s["one_minus_tv_stderr"]),
                     "n_contexts": int(s["n_contexts"])})
        if progress is not None:
            progress.update()
    if progress is not None:
        progress.close()
    target = {
        "source": info.source, "name": info.name, "kind": info.kind, "path": info.path,
        "converted_now": info.converted, "load_seconds": round(info.seconds, 2),
        "layers": n_layers, "vocab_size": pair.vocab_size,
        "context_window": pair.context_window,
        "parameters": int(sum(p.numel() for p in pair.target.parameters())),
        "device": str(pair.device), "dtype": str(pair.target.dtype).replace("torch.", ""),
    }
    if info.source == "embedded":
        target["gguf"] = str(_loading.embedded_gguf_path())
        target["wheel"] = (f"{_loading.EMBEDDED_WHEEL} "
                           f"{importlib.metadata.version(_loading.EMBEDDED_WHEEL)}")
    p = pair.processing
    out = {
        "target": target,
        "processing": {"temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p},
        "prompts": {"sets": ["humaneval", "sharegpt"], "per_set": args.prompts,
                    "seed": PROMPT_SEED, "max_tokens": args.max_tokens},
        "draft_kinds": [{"kind": k, "syntax": _SYNTAX[k], "description": _DESCRIPTIONS[k]}
                        for k in DRAFT_KINDS],
        "drafts": rows,
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    t = target
    print(f"target   {t['name']} ({t['source']}): {t['layers']} layers, "
          f"{t['parameters'] / 1e6:.1f}M parameters, vocabulary {t['vocab_size']}, "
          f"context {t['context_window']}, {t['dtype']} on {t['device']}")
    if "wheel" in t:
        print(f"         from {t['wheel']}: {t['gguf']}")
    how = "converted from GGUF and cached" if t["converted_now"] else "loaded"
    print(f"         {how} in {t['load_seconds']:.1f} s: {t['path']}")
    print(f"processing  temperature={p.temperature} top_k={p.top_k} top_p={p.top_p}")
    print("draft kinds")
    for k in out["draft_kinds"]:
        print(f"  {k['syntax']:<24} {k['description']}")
    n_ctx = rows[0]["n_contexts"] if rows else 0
    print(f"measured 1 - TV(p, q), mean over {n_ctx} contexts (every prefix of the first "
          f"{args.max_tokens} tokens of {len(texts)} prompts: HumanEval + ShareGPT, seed "
          f"{PROMPT_SEED}); +- cluster-robust standard error")
    for r in rows:
        print(f"  {r['draft']:<24} {r['one_minus_tv']:.3f} +- {r['stderr']:.3f}")
    return 0


command("models", "list the embedded model and the draft kinds with their measured 1 - TV",
        _models_arguments)(_models_run)


# ----------------------------------------------------------------------------- generate


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from specbound.sim.decode import DECODERS

    p.add_argument("prompt", help="the prompt text ('-': read it from standard input)")
    p.add_argument("--decoder", default="mpfr", choices=DECODERS, help="decoder (default mpfr)")
    p.add_argument("--B", type=int, default=1, help="number of drafts (default 1)")
    p.add_argument("--L", type=int, default=4, help="lookahead (default 4)")
    p.add_argument("--key", default=None,
                   help="watermark key (an integer or text; required by keyed decoders)")
    p.add_argument("--window", type=int, default=None,
                   help="watermark context window (default 4)")
    p.add_argument("--draft", default="temperature:1.5",
                   help="draft spec (default temperature:1.5)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="default 128")
    p.add_argument("--seed", type=int, default=0, help="unkeyed randomness (default 0)")
    p.add_argument("--template", default="default", help="prompt template (default, "
                   "summarize, eli5)")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--no-eos", action="store_true", help="do not stop at end-of-sequence")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_arguments(p)


def _key(text):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def _read_text(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    return source


def _generate_run(args: argparse.Namespace) -> int:
    from specbound import llm
    from specbound.llm.detection import detect
    from specbound.llm.drafts import parse_draft
    from specbound.llm.generation import DEFAULT_WINDOW, generate
    from specbound.sim.decode import KEYED_DECODERS

    parse_draft(args.draft)
    prompt = _read_text(args.prompt)
    key = _key(args.key)
    window = DEFAULT_WINDOW if args.window is None else args.window
    _set_threads(args)
    pair = llm.load_pair(args.target, draft=args.draft, device=args.device, dtype=args.dtype,
                         temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
    res = generate(pair, prompt, args.decoder, L=args.L, B=args.B, key=key, window=window,
                   max_new_tokens=args.max_new_tokens, seed=args.seed,
                   chat=not args.no_chat, template=args.template,
                   stop_at_eos=not args.no_eos, progress=not args.quiet)
    det = detect(res, key) if args.decoder in KEYED_DECODERS else None
    summary = {
        "decoder": args.decoder, "draft": str(pair.draft_spec), "B": res.B, "L": res.L,
        "window": window, "key_id": res.watermark.key_id,
        "new_tokens": res.n_generated, "blocks": int(res.emitted_per_block.size),
        "aatps": res.aatps, "target_forwards_per_token": res.target_forwards_per_token,
        "tokens_per_second": res.tokens_per_second, "total_seconds": res.total_seconds,
        "forward_seconds": res.forward_seconds, "stopped_at_eos": res.stopped_at_eos,
        "watermark_log10_pvalue": (None if det is None
                                   else det.log_pvalue / 2.302585092994046),
        "watermark_scored": None if det is None else det.n_scored,
    }
    if args.json:
        print(json.dumps({"text": res.text, **summary,
                          "tokens": res.generated.tolist()}, indent=1))
        return 0
    print(res.text)
    wm = ("no watermark (unkeyed decoder)" if det is None else
          f"watermark p = {np.exp(det.log_pvalue):.3g} over {det.n_scored} tokens")
    print(f"[{args.decoder} B={res.B} L={res.L} draft={summary['draft']}] "
          f"{res.n_generated} tokens, AATPS {res.aatps:.3f}, "
          f"{res.tokens_per_second:.2f} tokens/s, {wm}")
    return 0


command("generate", "generate text with a (watermarked, speculative) decoder",
        _generate_arguments)(_generate_run)


# ----------------------------------------------------------------------------- detect


def _detect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", default="-",
                   help="text file to test ('-' or nothing: standard input)")
    p.add_argument("--key", required=True, help="watermark key (an integer or text)")
    p.add_argument("--window", type=int, default=None,
                   help="the generator's context window (default 4)")
    p.add_argument("--score", default="aaronson", help="aaronson (default), u, li, lattimore")
    p.add_argument("--tokenizer", default="embedded",
                   help="'embedded' (default) or a Hugging Face model id / folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _detect_run(args: argparse.Namespace) -> int:
    from specbound.llm.detection import detect

    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ValueError(f"file: cannot read {args.file!r} ({exc.strerror})") from None
    det = detect(text, _key(args.key), tokenizer=args.tokenizer, window=args.window,
                 score=args.score)
    out = {"score_name": det.score_name, "score": det.score, "n_scored": det.n_scored,
           "log_pvalue": det.log_pvalue, "pvalue": float(np.exp(det.log_pvalue)),
           "anlppt": None if det.n_scored == 0 else det.anlppt}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{det.score_name} score {det.score:.3f} over {det.n_scored} tokens: "
          f"p-value {out['pvalue']:.3g} (log p = {det.log_pvalue:.2f})")
    return 0


command("detect", "test text for the keyed watermark (needs the key, not the model)",
        _detect_arguments)(_detect_run)
# ----------------------------------------------------------------------------- log


def _log_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the log")
    p.add_argument("--drafts", nargs="+", metavar="SPEC", default=None,
                   help="drafts logged at every context (default: temperature:0.5 "
                        "temperature:1.5 early_exit:<2/3 of the layers> quantized:3)")
    p.add_argument("--sets", nargs="+", default=["humaneval", "sharegpt"],
                   choices=["humaneval", "sharegpt"], help="prompt sets (default: both)")
    p.add_argument("--prompts", type=int, default=4, metavar="N",
                   help="prompts per set (seed --prompt-seed; default 4)")
    p.add_argument("--prompt-seed", type=int, default=0, help="prompt sampling seed")
    p.add_argument("--max-new-tokens", type=int, default=64, metavar="T",
                   help="tokens the target samples per prompt (default 64)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--no-chat", action="store_true", help="do not chat-format the prompts")
    p.add_argument("--max-stored", type=int, default=256,
                   help="tokens stored per distribution (default 256; exact under top-k <= it)")
    p.add_argument("--no-resume", action="store_true",
                   help="refuse an existing log instead of resuming it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _log_run(args: argparse.Namespace) -> int:
    from specbound import llm
    from specbound.llm.drafts import _layer_path, parse_draft
    from specbound.llm.logs import log_distributions

    specs = [str(parse_draft(d)) for d in args.drafts] if args.drafts else None
    _set_threads(args)
    texts, labels = [], []
    for name in args.sets:
        for i, t in enumerate(llm.prompts(name, args.prompts, seed=args.prompt_seed)):
            texts.append(t)
            labels.append(f"{name} prompts(n={args.prompts}, seed={args.prompt_seed})[{i}]")
    pair = llm.load_pair(args.target, draft="temperature:1", device=args.device,
                         dtype=args.dtype, temperature=args.temperature, top_k=args.top_k,
                         top_p=args.top_p)
    if specs is None:
        n = len(_layer_path(pair.target)[1])
        specs = ["temperature:0.5", "temperature:1.5",
                 f"early_exit:{max(1, min(n, round(2 * n / 3)))}", "quantized:3"]
    log = log_distributions(pair, texts, drafts=specs, max_new_tokens=args.max_new_tokens,
                            seed=args.seed, path=args.out, resume=not args.no_resume,
                            progress=not args.quiet, chat=not args.no_chat,
                            max_stored=args.max_stored, prompt_labels=labels)
    print(f"{log.path}: {len(log)} positions, {len(log.prompt_ids)} prompts, "
          f"drafts {', '.join(log.drafts)}")
    return 0


command("log", "log the target's and drafts' next-token distributions along the target's "
        "own samples (resumable)", _log_arguments)(_log_run)


# ----------------------------------------------------------------------------- entry


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="specbound",
        description="Speculative decoding on real language models: models, drafts, keyed "
                    "sampling.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv=None) -> int:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except (ValueError, ImportError, OSError) as exc:
        print(f"specbound {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
