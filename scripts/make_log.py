"""Make the real distribution log shipped with the package (``specbound.llm.shipped_log()``).

Deterministic: the embedded SmolLM2-135M-Instruct target (temperature 1, top-k 50: the
processing of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. D.1), the drafts
``temperature:0.5`` and ``temperature:1.5`` (their drafters D2/D3, App. D.5),
``early_exit:28`` and ``quantized:3`` (chosen so that the four drafts' mean 1 - TV differ:
about 0.8, 0.8, 0.5, 0.4 on these contexts), on the first ``PER_SET`` HumanEval and ShareGPT
prompts of ``specbound.llm.prompts(name, n, seed=0)``, chat-formatted; the target samples
``MAX_NEW_TOKENS`` tokens per prompt (seeded per prompt) and every context along its text
is logged (``specbound.llm.logs.log_distributions``).  Torch runs with one CPU thread, so the
floating-point reductions, and hence the files, are the same on every run on a machine;
``SHA256SUMS`` in the log folder lists every file's hash, and ``--check`` rebuilds the log in
a temporary folder and compares (the slow test does this).  About one to two minutes on one
CPU core.

Run from the repository root::

    python scripts/make_log.py            # (re)write specbound/llm/data/shipped_log
    python scripts/make_log.py --check    # rebuild elsewhere and compare the hashes
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout: use this checkout's package
    sys.path.insert(0, str(REPO))

DEFAULT_OUT = REPO / "specbound" / "llm" / "data" / "shipped_log"
DRAFTS = ("temperature:0.5", "temperature:1.5", "early_exit:28", "quantized:3")
PER_SET = 6
PROMPT_SEED = 0
MAX_NEW_TOKENS = 48
LOG_SEED = 2026
TOP_K = 50
SUMS = "SHA256SUMS"
MAX_BYTES = 5 * 2**20


def hash_files(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` except ``SHA256SUMS`` (relative POSIX paths)."""
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != SUMS:
            out[f.relative_to(folder).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def read_sums(folder: Path) -> dict[str, str]:
    out = {}
    for line in (folder / SUMS).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            digest, name = line.split(None, 1)
            out[name.strip()] = digest
    return out


def make(out: Path, progress: bool = True) -> Path:
    """Write the log into ``out`` (replaced if it exists) with its ``SHA256SUMS``."""
    import torch

    from specbound import llm
    from specbound.llm.logs import log_distributions

    torch.set_num_threads(1)
    torch.manual_seed(0)  # nothing here draws from torch; set for safety
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    texts, labels = [], []
    for name in ("humaneval", "sharegpt"):
        for i, t in enumerate(llm.prompts(name, PER_SET, seed=PROMPT_SEED)):
            texts.append(t)
            labels.append(f"{name} prompts(n={PER_SET}, seed={PROMPT_SEED})[{i}]")
    pair = llm.load_pair("embedded", draft=DRAFTS[0], device="cpu", temperature=1.0,
                         top_k=TOP_K)
    log_distributions(pair, texts, drafts=list(DRAFTS), max_new_tokens=MAX_NEW_TOKENS,
                      seed=LOG_SEED, path=out, resume=False, progress=progress,
                      prompt_labels=labels, extra={"script": "scripts/make_log.py"})
    sums = hash_files(out)
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    if total > MAX_BYTES:
        raise SystemExit(f"the log takes {total} bytes, more than {MAX_BYTES}")
    lines = [f"# torch {torch.__version__}; one CPU thread; scripts/make_log.py"]
    lines += [f"{d}  {n}" for n, d in sums.items()]
    (out / SUMS).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def check(reference: Path) -> list[str]:
    """Rebuild the log in a temporary folder; return the files whose hash differs."""
    want = read_sums(reference)
    with tempfile.TemporaryDirectory() as tmp:
        got = hash_files(make(Path(tmp) / "log", progress=False))
    names = sorted(set(want) | set(got))
    return [n for n in names if want.get(n) != got.get(n)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="log folder")
    ap.add_argument("--check", action="store_true",
                    help="rebuild in a temporary folder and compare with --out's SHA256SUMS")
    args = ap.parse_args(argv)
    if args.check:
        bad = check(args.out)
        if bad:
            print("differs: " + ", ".join(bad))
            return 1
        print("reproduced: every file's hash matches")
        return 0
    out = make(args.out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
