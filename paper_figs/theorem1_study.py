"""Theorem 1 study: distortion of truncation-based verification as the draft approaches p.

Theorem 1 (Zhou et al. 2026, arXiv:2607.26627, §5.2, App. G.4; docs/mathematics.md §3)
compares truncation-based verification (SpecCascade / typical acceptance) with the matched
truncation-sampling baseline ``p_Θ``:

- standard SD: the rule emits ``q_Θ = q 1_A / Z_Θ(q)`` (Eq. 13), and
  ``KL_SD = KL(q_Θ ‖ p_Θ) → 0`` as ``q → p`` (``theory.kl_truncation_sd``);
- tree verification with greedy drafting (EAGLE-3): the first candidate in ``A`` is accepted
  surely, the position emits a point mass ``δ_x`` and ``KL_tree = −log p_Θ(x) > 0`` does not
  vanish as ``q → p`` (``theory.kl_truncation_tree``; no candidate in ``A`` gives 0).

Along the path ``q_t = (1 − t) q + t p``, t ∈ [0, 1] (41 points), for three pairs over
n = 50 tokens (Zipf(s) targets on a random order, s = 0.8, 1.1, 1.5, with noisy drafts at
TV 0.3, 0.5, 0.7 — ``specbound.sim.distributions``; seeds fixed) and two truncation sets
(min-p with p_base = 0.1, η-sampling with ε = 0.02), the figure plots KL_SD(t) and
KL_tree(t) with D = 1 and D = 4 greedy candidates (top-D of ``q_t``).  Markers are Monte
Carlo checks at t ∈ {0, 0.25, 0.5, 0.75, 1}: the plug-in KL of 200,000 tokens emitted by
``sim.sample_induced`` (rule "truncation", Eq. 13) and of the first position of
``sim.simulate_tree_verification`` ("speccascade"), 20,000 with ``--quick``.  The plug-in
KL of an SD law is biased upward by about (cells − 1)/(2 n); the tree law is a point mass
and its estimate is exact.

Outputs: ``theorem1_study.png`` and ``theorem1_study.csv`` (columns ``pair, truncation, t,
kl_sd, kl_tree_D1, kl_tree_D4, mc_kl_sd, mc_kl_tree_D1`` — the ``mc_`` columns are empty
off the Monte Carlo grid).

Run: ``python -m paper_figs.theorem1_study [--quick] [--out DIR]
[--draws N] [--vocab N] [--zipf X,...] [--tv X,...]``
(``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import (
    Param,
    check_memory,
    resolve_params,
    setup_matplotlib,
    write_table_and_figure,
)
from specbound.sim import sample_induced, simulate_tree_verification
from specbound.sim.distributions import noisy_draft
from specbound.sim.distributions import zipf as zipf_law
from specbound.theory.tree import (
    eta_allowed,
    kl_truncation_sd,
    kl_truncation_tree,
    min_p_allowed,
    truncated_target,
)

FIGURE = True
NAME = "theorem1_study"
V = 50
TS = np.linspace(0.0, 1.0, 41)
MC_TS = (0.0, 0.25, 0.5, 0.75, 1.0)
ZIPF_S = (0.8, 1.1, 1.5)
DRAFT_TV = (0.3, 0.5, 0.7)
TRUNCATIONS = (("min-p 0.1", lambda p: min_p_allowed(p, 0.1)),
               ("η ε=0.02", lambda p: eta_allowed(p, 0.02)))


PARAMS = (
    Param("draws", "int", 200_000, 20_000, "Monte Carlo draws per checked point", low=1,
          # sample_induced's and simulate_tree_verification's per-draw arrays (uniforms,
          # proposals, accept flags, tokens) of one checked point: measured (tracemalloc)
          # 200 bytes a draw, about 25 float64 arrays of draws
          memory=lambda v: 26 * v.draws * 8),
    Param("vocab", "int", V, V, "tokens of every target", low=2,
          # the pairs, truncation masks and per-point laws and counts of the vocabulary:
          # measured (tracemalloc) at most 280 bytes a token (100,000 tokens, 1,000 draws)
          memory=lambda v: 36 * 8 * v.vocab),
    Param("zipf", "floats", ZIPF_S, ZIPF_S, "Zipf exponents of the targets (one pair each)",
          low=0, unique=False),
    Param("tv", "floats", DRAFT_TV, DRAFT_TV, "TV of each pair's draft (as many as --zipf; "
          "each below the TV the draft's noise reaches from its target)", low=0, high=1,
          high_open=True, unique=False, check=lambda v: _pairs_message(v.zipf, v.tv, v)),
)


def _pairs_message(zipf, tv, v=None) -> str | None:
    """``--tv`` pairs with ``--zipf`` element by element: equal lengths, no pair twice, and
    (with the values ``v``) each TV one that the pair's noisy draft reaches (a steep target,
    ``--zipf 1e12``, is a point mass that no noise moves: :func:`make_pairs` would fail)."""
    if len(tv) != len(zipf):
        return f"{len(tv)} values for {len(zipf)} --zipf values (one TV per pair)"
    pairs = list(zip(zipf, tv, strict=True))
    twice = next((p for i, p in enumerate(pairs) if p in pairs[:i]), None)
    if twice is not None:
        return f"the pair --zipf {twice[0]:g} --tv {twice[1]:g} is given twice"
    if v is not None:
        check_memory(PARAMS, v)  # the pairs' arrays fit before they are made
        try:
            make_pairs(v.vocab, zipf, tv)
        except ValueError as exc:
            msg = str(exc)
            msg = msg[len("tv: "):] if msg.startswith("tv: ") else msg
            row = next((k for k in range(len(tv)) if f"row {k} " in msg), None)
            pair = "" if row is None else f"the pair --zipf {zipf[row]:g} --tv {tv[row]:g}: "
            return pair + msg.replace("lower tv or change seed", "lower --tv or --zipf")
    return None


def make_pairs(vocab: int, zipf, tv) -> tuple[np.ndarray, np.ndarray]:
    """The study's targets (Zipf(s) on a random order, seeds fixed) and noisy drafts at the
    TVs ``tv``: arrays of shape (pairs, vocab)."""
    P = np.stack([zipf_law(vocab, s, seed=7 + k) for k, s in enumerate(zipf)])
    return P, noisy_draft(P, np.asarray(tv), seed=8).q


def _plugin_kl(counts: np.ndarray, ref: np.ndarray) -> float:
    f = counts / counts.sum()
    m = f > 0
    return float(np.sum(f[m] * np.log(f[m] / ref[m])))


def compute(quick: bool = False, **params) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    if len(v.zipf) != len(v.tv):
        raise ValueError(f"tv: needs one value per zipf exponent ({len(v.zipf)}), "
                         f"got {len(v.tv)}")
    n_mc, V = v.draws, v.vocab
    P, Q = make_pairs(V, v.zipf, v.tv)
    rows = []
    for i in range(P.shape[0]):
        p, q = P[i], Q[i]
        for tname, make in TRUNCATIONS:
            A = make(p)
            pt = truncated_target(p, A)
            for t in TS:
                qt = (1.0 - t) * q + t * p
                qt /= qt.sum()
                order = np.argsort(-qt, kind="stable")
                row = {"pair": i, "truncation": tname, "t": float(t),
                       "kl_sd": kl_truncation_sd(p, qt, A),
                       "kl_tree_D1": kl_truncation_tree(p, order[:1], A),
                       "kl_tree_D4": kl_truncation_tree(p, order[:4], A),
                       "mc_kl_sd": np.nan, "mc_kl_tree_D1": np.nan}
                if np.any(np.isclose(t, MC_TS)):
                    seed = int(1000 * t) + 10 * i
                    x = sample_induced(p, qt, "truncation", n_mc, seed=seed, allowed=A)
                    row["mc_kl_sd"] = _plugin_kl(np.bincount(x, minlength=V), pt)
                    res = simulate_tree_verification(p, qt, "speccascade", D=1, L=1,
                                                     allowed=A, n=n_mc, seed=seed)
                    row["mc_kl_tree_D1"] = _plugin_kl(res.emitted_counts[0], pt)
                rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs.update(zipf=v.zipf, tv=v.tv)
    return df


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    pairs = sorted(df["pair"].unique())
    tnames = [t for t, _ in TRUNCATIONS]
    zs, tvs = df.attrs.get("zipf", ZIPF_S), df.attrs.get("tv", DRAFT_TV)
    fig, axes = plt.subplots(len(tnames), len(pairs), figsize=(13.0, 6.8), sharex=True,
                             squeeze=False)
    for r, tname in enumerate(tnames):
        for c, i in enumerate(pairs):
            ax = axes[r, c]
            sub = df[(df["pair"] == i) & (df["truncation"] == tname)].sort_values("t")
            ax.plot(sub["t"], sub["kl_sd"], color="C0", label="KL_SD = KL(q_Θ‖p_Θ), standard SD")
            ax.plot(sub["t"], sub["kl_tree_D1"], color="C3", drawstyle="steps-post",
                    label="KL_tree = −log p_Θ(x), D = 1")
            ax.plot(sub["t"], sub["kl_tree_D4"], color="C1", ls="--", drawstyle="steps-post",
                    label="KL_tree, D = 4")
            mc = sub.dropna(subset=["mc_kl_sd"])
            ax.plot(mc["t"], mc["mc_kl_sd"], "o", color="C0", mfc="none", ms=6,
                    label="Monte Carlo (sample_induced)")
            ax.plot(mc["t"], mc["mc_kl_tree_D1"], "s", color="C3", mfc="none", ms=6,
                    label="Monte Carlo (tree, D = 1)")
            ax.set_title(f"Zipf({zs[i]}) target, TV(p, q) = {tvs[i]}, {tname}",
                         fontsize=9.5)
            ax.set_ylim(bottom=0.0)
            if r == len(tnames) - 1:
                ax.set_xlabel("t  (q_t = (1 − t) q + t p)")
            if c == 0:
                ax.set_ylabel("KL to p_Θ (nats)")
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.08))
    fig.suptitle("Theorem 1: KL_SD vanishes as the draft approaches the target, KL_tree does "
                 "not (n = 50 tokens)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``theorem1_study.csv`` and ``.png`` into ``out_dir``; return the paths."""
    df = compute(quick=quick, **params)
    return write_table_and_figure(out_dir, NAME, df, plot, "%.10g")


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
