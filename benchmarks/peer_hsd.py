"""The authors' HSD simulation functions against this package's exact laws (a cross-check).

Runs the verification functions of Fast-HSD's ``simulation/algorithm.py`` (Zhou et al.'s
code beside arXiv:2607.26627: ``FastHSD``, ``clever`` and their block verification
``block``) from a checkout given on the command line, on the toy pair of Sun et al.'s
motivating example (context-independent ``p = (1/3, 2/3)``, ``q = (2/3, 1/3)``, ``L = 2``),
and compares the frequencies of the first two emitted tokens and the mean tokens per block
with this package's exact values: the target's law ``p(a) p(b)``,
``theory.hsd_block_tokens`` (lossless HSD, and ``acceptance="joint"``, the released
full-block test) and ``theory.blockver_block_tokens``.  ``z`` is (frequency - exact) / its
binomial standard error under the exact value.  Nothing of the peer's code is copied: the
file is imported from the checkout.

    python -m benchmarks.peer_hsd --peer PATH/TO/Fast-HSD [--n 60000] [--seed 0]

Needs torch (the extra ``llm``).  The last result is recorded in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

from specbound.theory import blockver_block_tokens, hsd_block_tokens

P = np.array([1 / 3, 2 / 3])
Q = np.array([2 / 3, 1 / 3])
L = 2
FUNCTIONS = ("FastHSD", "clever", "block")


def _load(peer: Path):
    path = Path(peer) / "simulation" / "algorithm.py"
    if not path.is_file():
        raise SystemExit(f"--peer: no simulation/algorithm.py under {peer}")
    spec = importlib.util.spec_from_file_location("peer_hsd_algorithm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_token_block(fn, torch):
    """One block of the peer's function on the toy pair: its emitted tokens."""
    p = torch.tensor(P, dtype=torch.float64)
    q = torch.tensor(Q, dtype=torch.float64)
    xs = torch.multinomial(q.expand(L, 2), 1).T
    out = fn(xs, q.expand(1, L, 2).clone(), L, p.expand(1, L + 1, 2).clone())
    return out[0][0].tolist()


def run(peer: Path, n: int, seed: int) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    module = _load(peer)
    law = np.outer(P, P)
    exact_tokens = {
        "FastHSD": hsd_block_tokens(lambda c: P, lambda c: Q, [], L=L, context_length=0,
                                    acceptance="joint"),
        "clever": hsd_block_tokens(lambda c: P, lambda c: Q, [], L=L, context_length=0,
                                   acceptance="joint"),
        "block": blockver_block_tokens(lambda c: P, lambda c: Q, [], L=L, context_length=0),
    }
    rows = []
    for name in FUNCTIONS:
        fn = getattr(module, name)
        counts = np.zeros((2, 2))
        tokens = 0
        for _ in range(n):
            seq = _first_token_block(fn, torch)
            tokens += len(seq)
            if len(seq) < 2:  # the next block's first token
                seq = seq + _first_token_block(fn, torch)[:1]
            counts[seq[0], seq[1]] += 1
        freq = counts / n
        z = (freq - law) / np.sqrt(law * (1 - law) / n)
        rows.append(dict(function=name, freq=freq, z=z, tokens=tokens / n,
                         exact_tokens=exact_tokens[name]))
        print(f"{name:>8s}: first two tokens (0,0) {freq[0, 0]:.4f} (0,1) {freq[0, 1]:.4f} "
              f"(1,0) {freq[1, 0]:.4f} (1,1) {freq[1, 1]:.4f}; z against the target "
              f"{np.array2string(z.ravel(), precision=1)}; tokens per block {tokens / n:.4f} "
              f"(exact {exact_tokens[name]:.4f})", flush=True)
    print(f"target law: {law.ravel().round(4).tolist()}; lossless HSD (decoder hsd) tokens "
          f"per block {hsd_block_tokens(lambda c: P, lambda c: Q, [], L=L, context_length=0):.4f}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="a Fast-HSD checkout")
    parser.add_argument("--n", type=int, default=60_000, help="blocks per function")
    parser.add_argument("--seed", type=int, default=0, help="torch seed")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n: must be at least 1")
    return run(args.peer, args.n, args.seed)


if __name__ == "__main__":
    main()
