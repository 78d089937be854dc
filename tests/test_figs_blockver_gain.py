"""The ``blockver_gain`` study: block verification (Sun et al. 2024, arXiv:2403.10444,
Alg. 2) against token-wise speculative sampling, exact and by Monte Carlo.

The position-wise exact values are checked against ``theory.blockver_block_tokens`` and
``theory.expected_block_tokens`` (exact, path by path enumeration); the study's Monte Carlo
checks state their false-failure probabilities where they are used; the runs have fixed
seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paper_figs import blockver_gain as bg
from paper_figs._cli import cli
from specbound.theory import blockver_block_tokens, expected_block_tokens

#: a small run: both synthetic families at one mismatch, a few logged contexts of every draft
SMALL = dict(mismatch=(1.0,), L=(1, 2, 3, 4), contexts=6, mc_contexts=2)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("blockver_gain")
    written = bg.main(out, quick=True, **SMALL)
    return out, written, pd.read_csv(out / "blockver_gain.csv")


def _depth_fns(P, Q, prompt_len):
    """``p_fn`` / ``q_fn`` of a position-wise pair: the law of depth ``len(ctx) - prompt_len``
    whatever the tokens."""
    def p_fn(ctx):
        return P[len(ctx) - prompt_len]

    def q_fn(ctx):
        return Q[len(ctx) - prompt_len]

    return p_fn, q_fn


def _pairs(rng, n, L, zeros):
    P = rng.dirichlet(np.full(n, 0.6), size=L)
    Q = rng.dirichlet(np.full(n, 0.6), size=L)
    if zeros:  # a token the target never emits, another the draft never proposes
        P[:, 0] = 0.0
        Q[:, -1] = 0.0
        P /= P.sum(axis=1, keepdims=True)
        Q /= Q.sum(axis=1, keepdims=True)
    return P, Q


@pytest.mark.parametrize("seed", range(8))
def test_positionwise_values_equal_the_theory_path_by_path(seed):
    """The atoms of the residual weight and the two-depth last step give exactly the
    enumeration of ``theory.blockver_block_tokens`` (and the product of acceptances the
    ``sd`` recursion of ``theory.expected_block_tokens``) at every lookahead 1..5."""
    rng = np.random.default_rng(seed)
    n, L = int(rng.integers(2, 5)), 5
    P, Q = _pairs(rng, n, L, zeros=seed % 2 == 0)
    bv, sd = bg.positionwise_block_tokens(list(P), list(Q))
    p_fn, q_fn = _depth_fns(P, Q, 1)
    for ell in range(1, L + 1):
        assert bv[ell - 1] == pytest.approx(blockver_block_tokens(p_fn, q_fn, [0], L=ell),
                                            abs=1e-12)
        assert sd[ell - 1] == pytest.approx(expected_block_tokens(p_fn, q_fn, [0], "sd",
                                                                  L=ell), abs=1e-12)


def test_positionwise_known_value_and_identical_models():
    """Sun et al.'s i.i.d. example (``docs/mathematics.md`` §5.7): p = (1/2, 1/2),
    q = (3/4, 1/4), L = 2 gives 2.375 against vsps's 2.3125; identical laws keep every
    draft; laws of different widths per depth are allowed."""
    p, q = np.array([0.5, 0.5]), np.array([0.75, 0.25])
    bv, sd = bg.positionwise_block_tokens([p, p], [q, q])
    np.testing.assert_allclose(bv, [1.75, 2.375], rtol=0, atol=1e-15)
    np.testing.assert_allclose(sd, [1.75, 1 + 0.75 + 0.5625], rtol=0, atol=1e-15)
    r = np.array([0.2, 0.3, 0.5])
    bv, sd = bg.positionwise_block_tokens([p, r, p], [p, r, p])
    np.testing.assert_allclose(bv, [2, 3, 4], atol=1e-15)
    np.testing.assert_allclose(sd, [2, 3, 4], atol=1e-15)
    with pytest.raises(ValueError, match="^Q"):
        bg.positionwise_block_tokens([p, p], [q])
    with pytest.raises(ValueError, match="^Q"):
        bg.positionwise_block_tokens([p], [r])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 12), L=st.integers(1, 4),
       zeros=st.booleans())
def test_gain_is_at_least_one_and_one_at_one_draft(seed, n, L, zeros):
    """Property (Sun et al. 2024, arXiv:2403.10444; ``docs/mathematics.md`` §5.7): block
    verification keeps at least as many tokens as token-wise speculative sampling, the same
    at ``L = 1``; both lie in ``[1, L + 1]`` and grow with ``L``."""
    P, Q = _pairs(np.random.default_rng(seed), n, L, zeros)
    bv, sd = bg.positionwise_block_tokens(list(P), list(Q))
    assert bv[0] == pytest.approx(sd[0], abs=1e-14)
    assert np.all(bv >= sd - 1e-12)
    assert np.all((bv >= 1 - 1e-12) & (bv <= np.arange(2, L + 2) + 1e-12))
    assert np.all(np.diff(bv) >= -1e-12)


def test_positionwise_models_are_the_pair():
    """The ``MarkovLM`` form the Monte Carlo decodes: its sequence law of depth ``L`` from
    the empty prompt is the product of the depth laws, in token blocks ``i k + x``."""
    rng = np.random.default_rng(3)
    P, Q = _pairs(rng, 3, 3, zeros=True)
    tm, dm = bg.positionwise_models(list(P), list(Q))
    assert tm.vocab_size == dm.vocab_size == 9
    for model, laws in ((tm, P), (dm, Q)):
        ctx = []
        for i in range(3):
            law = model.next_distribution(ctx)
            np.testing.assert_array_equal(law[3 * i: 3 * i + 3], laws[i])
            assert law.sum() == pytest.approx(1.0)
            ctx = ctx + [3 * i + int(np.argmax(laws[i]))]


def test_quick_run_writes_the_files(small_run):
    out, written, df = small_run
    names = {p.name for p in written}
    assert names == {"blockver_gain.csv", "blockver_gain.png", "blockver_gain.md",
                     "blockver_gain_summary.csv"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    assert set(df["part"]) == {"synthetic", "logged"}
    md = (out / "blockver_gain.md").read_text(encoding="utf-8")
    assert "## Synthetic pairs" in md and "## Logged distributions" in md
    assert "all checks pass" in md
    summary = pd.read_csv(out / "blockver_gain_summary.csv")
    assert set(summary["L"]) == set(bg.REAL_L) and (summary["prompts"] >= 2).all()


def test_exact_gain_is_at_least_one_and_one_at_L1(small_run):
    _, _, df = small_run
    assert (df["gain"] >= 1 - bg.GAIN_ATOL).all()
    np.testing.assert_allclose(df.loc[df["L"] == 1, "gain"], 1.0, rtol=0, atol=1e-12)
    syn = df[df["part"] == "synthetic"]
    # the synthetic pairs gain strictly from L = 2 on
    assert (syn.loc[syn["L"] >= 2, "gain"] > 1.0 + 1e-4).all()
    # the per-context gain rises with L on every logged context
    wide = df[df["part"] == "logged"].pivot_table(index=["draft", "position"], columns="L",
                                                  values="blockver")
    assert (np.diff(wide.to_numpy(), axis=1) >= -1e-12).all()


def test_monte_carlo_agrees_with_the_exact_values(small_run):
    """Every Monte Carlo z-score (blockver, vsps and the paired gain, on both parts: 3 x 8 +
    3 x 32 = 120 checks at 1,000 blocks each) within ``Z_MAX = 5``: a false-failure
    probability of at most 120 x 5.7e-7 = 7e-5 (union bound; the seeds are fixed, so the run
    itself is deterministic)."""
    _, _, df = small_run
    assert bg.checks(df) == []
    mc = df[df["mc_n"].notna()]
    assert len(mc) == 2 * 4 + 4 * 2 * 4
    assert np.isfinite(mc[["z_blockver", "z_vsps", "z_gain"]].to_numpy()).all()


def test_a_swapped_exact_value_is_caught(tmp_path, monkeypatch):
    """Fault injection: the exact value of ``blockver`` replaced by ``vsps``'s.  The gain
    becomes 1 everywhere and the Monte Carlo of blockver at L = 4 (exact difference 0.14 and
    0.19 tokens on the two synthetic pairs, standard error about 0.013 at 10,000 blocks: z
    about 10 and 14) exceeds ``Z_MAX`` (missed when an estimate is off by more than 5
    standard errors against it: probability below 1e-6)."""
    import specbound.sim as sim

    real = sim.expected_block_tokens

    def swapped(target, draft, prompt, decoder, **kw):
        return real(target, draft, prompt, "vsps" if decoder == "blockver" else decoder, **kw)

    monkeypatch.setattr(sim, "expected_block_tokens", swapped)
    df = bg.compute(tmp_path, quick=True, mismatch=(1.0,), L=(1, 4), blocks=10_000, contexts=2,
                    mc_contexts=0, real_L=(1, 2), progress=False)
    bad = bg.checks(df)
    assert sum("|z_blockver|" in b and "L = 4" in b for b in bad) == 2, bad


def test_swapped_roles_break_the_gain_bound():
    """The other fault: blockver's and vsps's values exchanged, the gain falls below 1."""
    df = pd.DataFrame({"part": ["logged", "logged"], "setting": ["d", "d"], "position": [0, 0],
                       "L": [1, 2], "blockver": [1.5, 2.0], "vsps": [1.5, 2.1]})
    df["gain"] = df["blockver"] / df["vsps"]
    assert bg.checks(df) == [f"gain {2.0 / 2.1:.12g} < 1: d, L = 2"]
    df.loc[0, "gain"] = 1.01
    assert len(bg.checks(df)) == 2


@pytest.mark.parametrize(("argv", "flag"), [
    (["--L", "9", "--vocab", "8"], "--L"),
    (["--L", "0"], "--L"),
    (["--real-L", "6"], "--real-L"),
    (["--real-L", "2,2"], "--real-L"),
    (["--mismatch", "nan"], "--mismatch"),
    (["--blocks", "1"], "--blocks"),
    (["--vocab", "1"], "--vocab"),
    (["--contexts", "-1"], "--contexts"),
    (["--log", "/does/not/exist"], "--log"),
])
def test_bad_flags_are_refused_at_parse_time(argv, flag, capsys):
    def never(*a, **k):
        raise AssertionError("the study started with an invalid flag")

    with pytest.raises(SystemExit) as exc:
        cli(never, bg.__doc__, bg.PARAMS, bg.NAME, ["--quick", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"python -m paper_figs.blockver_gain: error: {flag}: "), err
