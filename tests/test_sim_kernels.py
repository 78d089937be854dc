"""The one set of step kernels (specbound.sim._kernels): decoder-facing kernels against their
NumPy references, the inverse-CDF rule, identities between kernels, and identical discrete
outputs with the project's fastmath flags on and off.

Tests marked ``kernel`` compare a Numba kernel with its NumPy reference in
``specbound.sim._reference``; ``make test-nojit`` runs them with ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.sim import _kernels as K
from specbound.sim import _reference as R
from specbound.testing.strategies import prob_pairs, prob_vectors

ROOT = Path(__file__).resolve().parents[1]
_TAB = np.empty((1, 1))


# ------------------------------------------------------------------- kernels vs NumPy


@pytest.mark.kernel
@given(prob_vectors(max_size=60), st.integers(0, 2**64 - 1), st.integers(0, 3))
def test_race_argmin_matches_reference(p, label, arrival):
    got = K.race_argmin(np.uint64(label), p, arrival)
    assert got == R.race_argmin(np.uint64(label), p, arrival)
    assert p[got] > 0


@pytest.mark.kernel
@given(prob_vectors(max_size=60), st.integers(0, 2**64 - 1),
       st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True))
def test_gls_argmin_matches_reference(p, label, cols):
    c = np.array(cols, dtype=np.int64)
    got = K.gls_argmin(np.uint64(label), p, c)
    assert got == R.gls_argmin(np.uint64(label), p, c)
    assert p[got] > 0


@pytest.mark.kernel
@given(prob_vectors(max_size=60), st.integers(0, 2**64 - 1), st.integers(1, 6))
def test_mpfr_topk_matches_reference(q, label, k):
    out = np.empty(k, dtype=np.int64)
    K.mpfr_topk(np.uint64(label), q, k, out)
    np.testing.assert_array_equal(out, R.mpfr_topk(np.uint64(label), q, k))
    assert np.all(q[out] > 0)
    # the first MPFR sample is the exponential race winner (arrival 0)
    assert out[0] == K.race_argmin(np.uint64(label), q, 0)


@pytest.mark.kernel
@given(prob_pairs(max_size=80), st.integers(0, 2**64 - 1), st.integers(1, 9))
def test_decoder_kernels_are_the_sampler_kernels(pq, label, B):
    """mpfr_topk = drafts of mpfr_fast_step; race_argmin = the targets of exp_race_step and
    mpfr_fast_step; gls_argmin over columns 0..B-1 = the target of gls_step."""
    p, q = pq
    lab = np.uint64(label)
    drafts = np.empty(B, np.int64)
    y, _ = K.mpfr_fast_step(p, q, B, lab, _TAB, False, drafts, K.mpfr_heap(B))
    top = np.empty(B, np.int64)
    K.mpfr_topk(lab, q, B, top)
    np.testing.assert_array_equal(top, drafts)
    assert y == K.race_argmin(lab, p, 0)
    ye, xe = K.exp_race_step(p, q, lab, _TAB, False)
    assert (ye, xe) == (K.race_argmin(lab, p, 0), K.race_argmin(lab, q, 0))
    gd = np.empty(B, np.int64)
    yg, _ = K.gls_step(p, q, B, lab, _TAB, False, gd)
    assert yg == K.gls_argmin(lab, p, np.arange(B, dtype=np.int64))
    assert all(gd[b] == K.race_argmin(lab, q, b) for b in range(B))


@pytest.mark.kernel
@given(prob_vectors(max_size=60), st.floats(0.0, 1.0, exclude_max=True))
def test_categorical_matches_reference(w, u):
    got = K.categorical(w, u)
    assert got == R.inv_cdf(w, u) == K.inv_cdf(np.cumsum(w), u)
    assert w[got] > 0


@pytest.mark.kernel
@given(prob_vectors(max_size=60), st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1,
                                           max_size=20))
def test_inv_cdf_many_matches_reference(w, us):
    us = np.array(us)
    out = np.empty(us.size, np.int64)
    K.inv_cdf_many(np.cumsum(w), us, out)
    np.testing.assert_array_equal(out, R.inv_cdf_many(w, us))
    assert np.all(w[out] > 0)


@pytest.mark.kernel
def test_inv_cdf_tie_rule():
    """Smallest i with cumsum(w)[i] > u * sum(w); never a zero-mass token; rounding fallback."""
    w = np.array([0.0, 0.25, 0.0, 0.0, 0.5, 0.25, 0.0])
    cdf = np.cumsum(w)
    cases = {0.0: 1, 1e-300: 1, 0.25: 4, np.nextafter(0.25, 0): 1, 0.5: 4, 0.75: 5,
             np.nextafter(0.75, 0): 4, np.nextafter(1.0, 0): 5}
    for u, want in cases.items():
        assert K.inv_cdf(cdf, u) == want == R.inv_cdf(w, u), u
    # u * total rounded up to the total (u = 1 stands in for it): last positive-mass token
    assert K.inv_cdf(cdf, 1.0) == 5 == R.inv_cdf(w, 1.0)
    # scale-free: unnormalised weights give the same tokens
    for u in cases:
        assert K.categorical(3.0 * w, u) == K.inv_cdf(cdf, u)
    assert K.inv_cdf(np.array([2.0]), 0.7) == 0
    # the streamed draw (categorical, residual_sample) takes its exact path at the CDF steps
    # above (u * total equal to a running sum) and for subnormal totals
    w = np.array([1e-310, 0.0, 2e-310, 0.0])
    for u in (0.0, 0.3, 1 / 3, 0.5, np.nextafter(1.0, 0)):
        assert K.categorical(w, u) == K.inv_cdf(np.cumsum(w), u) == R.inv_cdf(w, u)
        assert K.residual_sample(w, np.zeros(4), u) == K.categorical(w, u)
    # weights absorbed by the running sum have an empty interval in floating point too: the
    # streamed draw follows the running sum, not the weights
    w = np.array([1.0, 1e-17, 0.0, 1e-17])
    for u in (0.0, 0.5, np.nextafter(1.0, 0), 1.0):
        assert K.categorical(w, u) == K.inv_cdf(np.cumsum(w), u) == R.inv_cdf(w, u) == 0
        assert K.residual_sample(w, np.zeros(4), u) == 0


@pytest.mark.kernel
@given(prob_pairs(max_size=30), st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_specinfer_verify_matches_reference(pq, seed, k):
    p, q = pq
    rng = np.random.default_rng(seed)
    if not np.all(q[p > 0] > 0):
        q = 0.5 * (p + q)
    cands = rng.choice(q.shape[0], size=k, p=q).astype(np.int64)
    u_acc, u_res = rng.random(k), float(rng.random())
    got = K.specinfer_verify(p, q, cands, u_acc, u_res)
    assert got == R.specinfer_verify(p, q, cands, u_acc, u_res)
    assert p[got[0]] > 0


@pytest.mark.kernel
@given(prob_pairs(max_size=30))
def test_residual_matches_reference(pq):
    p, q = pq
    # the normalising sums may be accumulated in different orders: a few ulps apart
    np.testing.assert_allclose(K.residual(p, q), R.residual(p, q), rtol=1e-14, atol=0)


@pytest.mark.kernel
@given(st.integers(0, 2**64 - 1), st.integers(0, 10**6))
def test_trial_label_matches_reference(base, t):
    assert K.trial_label(np.uint64(base), t) == R.trial_label(base, t)


@pytest.mark.kernel
@given(prob_pairs(max_size=30), st.floats(0.0, 1.0, exclude_max=True))
def test_residual_sample_matches_reference(pq, u):
    p, q = pq
    y = K.residual_sample(p, q, u)
    assert y == R.residual_sample(p, q, u)
    if np.any(p > q):
        assert p[y] > q[y]
    else:
        assert p[y] > 0


# ------------------------------------------------------------------- fastmath on and off


def _fastmath_outputs():
    """Discrete outputs of every sampler scheme and every decoder step kernel on fixed
    tables of uniforms and fixed keyed labels (run in this process and in a process with
    ``SPECBOUND_FASTMATH=0``).  The estimators' ``batch_kernel`` runs the same step kernels
    under ``prange``, and the decoders call the step kernels below."""
    from specbound.sim import SAMPLERS, sample_step
    from specbound.sim.samplers import SINGLE_DRAFT, clock_shape

    rng = np.random.default_rng(2024)
    out = []
    for n in (1, 2, 7, 60, 400):
        p = rng.dirichlet(np.full(n, 0.4))
        q = rng.dirichlet(np.full(n, 0.4))
        if n > 2:
            p[rng.permutation(n)[: n // 3]] = 0.0
            p /= p.sum()
        qa = 0.7 * q + 0.3 * p  # p << qa for mpfr_scan
        for scheme in SAMPLERS:
            qq = qa if scheme == "mpfr_scan" else q
            for B in ((1,) if scheme in SINGLE_DRAFT else (1, 3, 8)):
                for _ in range(4):
                    U = rng.random(clock_shape(scheme, n, B, scan_rows=4000))
                    s = sample_step(p, qq, scheme, B, uniforms=U)
                    out.append((s.token, s.drafts.tolist(), s.accepted))
                s = sample_step(p, qq, scheme, B, key=n, context=[B, 1])
                out.append((s.token, s.drafts.tolist(), s.accepted))
        for lab in rng.integers(0, 2**63, size=6).astype(np.uint64):
            buf = np.empty(5, np.int64)
            K.mpfr_topk(lab, q, 5, buf)
            cands = buf[:3].copy()
            y, ok = K.specinfer_verify(p, qa, cands, rng.random(3), float(rng.random()))
            out.append((K.race_argmin(lab, p, 0), K.race_argmin(lab, q, 2),
                        K.gls_argmin(lab, p, np.array([2, 0, 1], np.int64)), buf.tolist(),
                        K.categorical(p, float(rng.random())),
                        K.residual_sample(p, q, float(rng.random())), int(y), bool(ok),
                        int(K.trial_label(lab, 7))))
        many = np.empty(50, np.int64)
        K.inv_cdf_many(np.cumsum(q), rng.random(50), many)
        out.append(many.tolist())
    return out


def test_discrete_outputs_identical_with_fastmath_on_and_off(tmp_path):
    """The fastmath flags of ``sim._config`` (never nnan/ninf) may move a score by an ulp but
    must not change a token: every kernel of the package is compiled again, without fastmath
    and without the on-disk cache, in a fresh process (``SPECBOUND_FASTMATH=0``).  The
    recompile takes 20-45 s on the 2-core machine (load 2-4)."""
    if numba.config.DISABLE_JIT:
        pytest.skip("nothing is compiled under NUMBA_DISABLE_JIT")
    code = (
        "import pickle, sys\n"
        "from specbound.sim import _config, _kernels\n"
        "from tests.test_sim_kernels import _fastmath_outputs\n"
        "assert _config.FASTMATH_ON is False and _config.JIT['fastmath'] is False\n"
        "assert _kernels.exp_race_step.targetoptions['fastmath'] is False\n"
        "sys.stdout.buffer.write(pickle.dumps(_fastmath_outputs()))\n"
    )
    env = dict(os.environ, SPECBOUND_FASTMATH="0", NUMBA_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         timeout=900, check=False)
    assert res.returncode == 0, res.stderr.decode()[-3000:]
    off = pickle.loads(res.stdout)
    from specbound.sim import _config

    assert _config.FASTMATH_ON and K.exp_race_step.targetoptions["fastmath"] == _config.FASTMATH
    on = _fastmath_outputs()
    assert len(on) == len(off)
    for a, b in zip(on, off, strict=True):
        assert a == b
