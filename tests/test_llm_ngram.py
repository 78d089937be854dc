"""Prompt-lookup drafts ``ngram:N[:K]`` (specbound.llm.ngram, specbound.llm.drafts).

- the spec's grammar and its errors (before any model loads; CLI exit 2);
- the incrementally kept n-gram index against a scan of the whole sequence (hypothesis), and
  a lookup that reads a bounded tail of one key's list whatever the text's length; the
  back-off (``min=M``): the most recent occurrence of the longest matching suffix (hypothesis
  against a scan, hand-made sequences), one gate estimate per matched length;
- the acceptance gate: the break-even acceptance, the block length it picks (hypothesis
  against a brute force), a gate that closes on rejected proposals, keeps scoring them on
  ``ar`` steps and reopens on a repeating text;
- on a synthetic model wrapped as a torch module: no draft forward, blocks as long as the
  lookup, an ``ar`` step where nothing is found, keyed drafter invariance, ``generate_batch``
  and ``custom_generate`` equal to ``generate``, the joint law of the first two tokens
  (goodness of fit), and the theory's acceptance of a point-mass draft = ``p(drafted token)``;
- slow tier, the embedded SmolLM2-135M-Instruct: first-token goodness of fit of vsps,
  specinfer B = 2 and mpfr B = 2 with n-gram drafts at a prompt whose lookup succeeds, and
  keyed drafter invariance against the ``temperature:1.5`` draft; the adaptive gate (the
  second token's law where the first token opened the gate and where it did not) and the
  back-off's first token.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import llm, sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from specbound.llm.drafts import DraftSpec, parse_draft  # noqa: E402
from specbound.llm.ngram import NgramDrafter, NgramIndex, naive_continuations  # noqa: E402
from specbound.sim.decode import SyntheticBackend  # noqa: E402
from tests._llm_synth import synthetic_pair  # noqa: E402
from tests._stats import FAILURE_RATE, assert_gof, bonferroni  # noqa: E402

V = 12


# ----------------------------------------------------------------------------- the spec


@pytest.mark.parametrize("text,spec,canonical", [
    ("ngram:3", DraftSpec("ngram", 3, None, None), "ngram:3"),
    ("ngram:1:5", DraftSpec("ngram", 1, None, 5), "ngram:1:5"),
    ("ngram:2:4:ar", DraftSpec("ngram", 2, None, 4), "ngram:2:4"),
    (" ngram: 3 ", DraftSpec("ngram", 3, None, None), "ngram:3"),
    ("ngram:3:fixed=0:cost=0", DraftSpec("ngram", 3, None, None, (0.0, 0.0)),
     "ngram:3:fixed=0:cost=0"),
    ("ngram:2:4:ar:cost=0.5", DraftSpec("ngram", 2, None, 4, (0.5, 0.5)),
     "ngram:2:4:fixed=0.5:cost=0.5"),
    ("ngram:2:cost=0.3:fixed=1", DraftSpec("ngram", 2, None, None, (1.0, 0.3)),
     "ngram:2:fixed=1:cost=0.3"),
    ("ngram:3:fixed=0.5:cost=0.1", DraftSpec("ngram", 3, None, None), "ngram:3"),  # default
    ("ngram:3:min=1", DraftSpec("ngram", 3, None, None, None, 1), "ngram:3:min=1"),
    ("ngram:3:min=3", DraftSpec("ngram", 3, None, None), "ngram:3"),  # min = N: no shorter
    ("ngram:4:2:ar:cost=0:min= 2", DraftSpec("ngram", 4, None, 2, (0.5, 0.0), 2),
     "ngram:4:2:min=2:fixed=0.5:cost=0"),
])
def test_parse_valid_specs(text, spec, canonical):
    got = parse_draft(text)
    assert got == spec and str(got) == canonical
    assert parse_draft(str(got)) == got and parse_draft(got) == got
    assert "prompt lookup" in got.description


@pytest.mark.parametrize("text,match", [
    ("ngram:0", "ngram N .* must be >= 1 and <= 1024, got 0 in 'ngram:0'"),
    ("ngram:-1", "ngram N .* must be >= 1 and <= 1024, got -1"),
    ("ngram:3:0", "ngram K .* must be >= 1 and <= 1024, got 0 in 'ngram:3:0'"),
    ("ngram:10000000000", "ngram N .* <= 1024, got 10000000000"),
    ("ngram:3:1025", "ngram K .* <= 1024, got 1025"),
    ("ngram:3:-2", "ngram K"),
    ("ngram:2.5", "ngram N must be an integer, got '2.5'"),
    ("ngram:three", "ngram N must be an integer"),
    ("ngram:3:x", "ngram K must be an integer"),
    ("ngram:", "ngram N must be an integer"),
    ("ngram:3:4:temperature", "fallback 'temperature' in 'ngram:3:4:temperature' is not known"),
    ("ngram:3:4:bogus", "fallback 'bogus'"),
    ("ngram:3:4:temperature:1.5", r"ngram takes N, N:K or N:K:FALLBACK \(then optionally "
                                  r":min=M:fixed=F:cost=S\), got 'ngram:3:4:temperature:1.5'"),
    ("ngram:3:cost=-1", r"ngram cost \(the verify-cost model\) must be a finite number >= 0, "
                        "got '-1' in 'ngram:3:cost=-1'"),
    ("ngram:3:fixed=inf", "ngram fixed"),
    ("ngram:3:4:cost=x", "ngram cost .* got 'x'"),
    ("ngram:3:slope=1", "ngram option 'slope' in 'ngram:3:slope=1' is not known"),
    ("ngram:3:cost=1:cost=2", "ngram option 'cost' .* is not known or repeated"),
    ("ngram:cost=0", "ngram N must be an integer, got 'cost=0'"),
    ("ngram:3:min=0", r"ngram min \(the shortest looked-up suffix\) must be an integer in "
                      r"\[1, N = 3\], got '0' in 'ngram:3:min=0'"),
    ("ngram:3:min=4", r"ngram min .* \[1, N = 3\], got '4'"),
    ("ngram:3:min=-1", "ngram min .* got '-1'"),
    ("ngram:3:min=1.5", "ngram min .* got '1.5'"),
    ("ngram:3:min=", "ngram min .* got ''"),
    ("ngram:3:min=one", "ngram min .* got 'one' in 'ngram:3:min=one'"),
    ("ngram:3:min=1:min=2", "ngram option 'min' .* is not known or repeated; the options are "
                            "min=M, fixed=F and cost=S"),
    ("ngram:0:min=1", "ngram N .* must be >= 1 and <= 1024, got 0"),
    ("ngram:min=1", "ngram N must be an integer, got 'min=1'"),
    ("ngram:3:min=1:4", "ngram K must be an integer, got 'min=1'"),
])
def test_bad_specs_name_the_draft(text, match):
    with pytest.raises(ValueError, match=f"^draft: .*{match}"):
        parse_draft(text)


@given(st.text(max_size=12))
def test_hostile_min_option_is_a_spec_or_a_value_error_naming_it(text):
    """Any text after ``min=``: a valid spec whose canonical text reads back as itself, or a
    ``ValueError`` naming the draft spec (never another exception)."""
    try:
        spec = parse_draft(f"ngram:3:min={text}")
    except ValueError as e:
        assert str(e).startswith("draft: ngram ")
    else:
        assert spec.min_n in (None, 1, 2) and parse_draft(str(spec)) == spec


def test_bad_spec_fails_before_any_model_loads(monkeypatch):
    from specbound.llm import models

    def boom(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", boom)
    with pytest.raises(ValueError, match="^draft: ngram N"):
        llm.load_pair("embedded", draft="ngram:0")


def test_cli_bad_ngram_spec_exits_2_with_one_line(capsys):
    from specbound import cli

    assert cli.main(["generate", "hi", "--decoder", "vsps", "--draft", "ngram:3:0",
                     "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ngram K" in err


# ----------------------------------------------------------------------------- the index


@given(st.lists(st.integers(0, 3), max_size=60), st.integers(1, 4), st.integers(1, 6),
       st.integers(1, 3), st.lists(st.integers(1, 7), max_size=12))
def test_index_equals_a_scan(tokens, n, length, count, chunks):
    """The index, filled in random chunks, finds what a scan of the whole sequence finds,
    after every chunk."""
    idx = NgramIndex(n)
    i = 0
    for c in chunks + [len(tokens)]:
        idx.extend(tokens[i:i + c])
        i += c
        assert idx.continuations(length, count) == naive_continuations(
            tokens[:min(i, len(tokens))], n, length, count)
        if i >= len(tokens):
            break


@given(st.lists(st.integers(0, 3), max_size=60), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 6), st.integers(1, 3), st.lists(st.integers(1, 7), max_size=12))
def test_backoff_index_equals_a_scan(tokens, n, n0, length, count, chunks):
    """With shorter suffixes (``min_n``), the index finds what a scan finds: the longest
    suffix (``n`` down to ``min_n`` tokens) with an earlier occurrence, its continuations
    from the most recent occurrence; the matched length is the longest one a scan finds."""
    n0 = min(n0, n)
    idx = NgramIndex(n, min_n=n0)
    i = 0
    for c in chunks + [len(tokens)]:
        idx.extend(tokens[i:i + c])
        i += c
        seen = tokens[:min(i, len(tokens))]
        m, conts = idx.match(length, count)
        assert conts == naive_continuations(seen, n, length, count, n0)
        longest = next((j for j in range(n, n0 - 1, -1) if naive_continuations(
            seen, j, 1)), 0)
        assert m == longest and (m == 0) == (conts == [])
        if i >= len(tokens):
            break


def test_backoff_finds_the_most_recent_occurrence_of_the_longest_suffix():
    """Hand-made sequences: the 3-gram wins over a more recent 2-gram, the 2-gram over a
    more recent 1-gram, the 1-gram when nothing longer occurred; ``min_n = n`` never backs
    off."""
    # (7, 8, 9) occurred once, followed by 1; (8, 9) also later, followed by 2; 9 alone
    # most recently, followed by 3
    seq = [7, 8, 9, 1, 0, 8, 9, 2, 0, 9, 3, 0, 7, 8, 9]
    idx = NgramIndex(3, seq, min_n=1)
    assert idx.match(2) == (3, [(1, 0)])
    assert NgramIndex(2, seq, min_n=1).match(2) == (2, [(2, 0)])  # the most recent (8, 9)
    assert NgramIndex(1, seq).match(2) == (1, [(3, 0)])
    idx.extend([5, 9])  # (5, 9) and (9, 5, 9) never occurred: the 1-gram 9, most recent
    # first (at 14, two tokens after it: every continuation is cut to two tokens)
    assert idx.match(4, 3) == (1, [(5, 9), (3, 0), (2, 0)])
    assert idx.positions([9]) == [2, 6, 9, 14] and idx.positions([8, 9]) == [2, 6, 14]
    assert NgramIndex(3, seq + [5, 9]).match(4) == (0, [])  # no back-off without min_n
    assert NgramIndex(3, seq + [5, 9], min_n=2).match(4) == (0, [])
    idx.extend([4])  # 4 never occurred: no suffix of any length
    assert idx.match(4) == (0, []) and idx.continuations(4) == []
    assert NgramIndex(3, [1], min_n=1).match(2) == (0, [])  # shorter than every key
    assert NgramIndex(3, [1, 1], min_n=1).match(2) == (1, [(1,)])


@pytest.mark.parametrize("min_n", [0, 4, -1])
def test_backoff_index_bad_min_n(min_n):
    with pytest.raises(ValueError, match="^min_n: must be an integer in \\[1, n = 3\\]"):
        NgramIndex(3, min_n=min_n)


def test_backoff_gate_keeps_one_estimate_per_matched_length():
    """A proposal from a 1-gram match is scored into the 1-gram estimate only; the 2-gram's
    stays at the prior (a shorter match is a weaker prediction)."""
    from specbound.llm.ngram import PRIOR

    d = NgramDrafter(2, None, 10, cost=(0.0, 0.4), min_n=1)
    assert sorted(d.estimates) == [1, 2] and d.estimate is d.estimates[2]
    d.reset([5, 1, 2, 6])
    d.extend([1])  # (6, 1) never occurred; 1 did, followed by 2
    assert d.index.match(4) == (1, [(2, 6, 1)])
    assert d.plan(4, 1) >= 1  # the prior clears the break-even of cost (0, 0.4)
    d.extend([7])  # rejected at once
    assert d.estimates[1].decisions == 1 and d.estimates[1].accepted == 0
    assert d.estimates[2].decisions == 0 and d.estimates[2].value == PRIOR
    d.reset([3, 4, 5, 3, 4])  # a fresh sequence: fresh estimates, a 2-gram match
    assert d.estimates[1].decisions == 0
    assert d.plan(4, 1) == 1  # E_1(0.45) / 1.4 > 1 > E_2(0.45) / 1.8
    d.extend([5, 3])
    assert d.estimates[2].decisions == 1 and d.estimates[2].accepted == 1


def test_index_positions_and_distinct_continuations():
    idx = NgramIndex(2, [5, 6, 1, 5, 6, 2, 5, 6, 1, 7, 5, 6])
    assert idx.positions([5, 6]) == [1, 4, 7]  # the last (5, 6) has no continuation yet
    # most recent first; (1, 7) beats (2, 5) by recency, (1, 7)'s twin (1, ...) at 1 differs
    assert idx.continuations(2, 3) == [(1, 7), (2, 5), (1, 5)]
    assert idx.continuations(9, 1) == [(1, 7, 5, 6)]  # capped by the tokens after it
    assert NgramIndex(3, [1, 2, 3]).continuations(4) == []


class _CountingList(list):
    """A list that records how many entries every read of it returns."""

    reads: list

    def __getitem__(self, i):
        out = super().__getitem__(i)
        self.reads.append(len(out) if isinstance(i, slice) else 1)
        return out

    def __iter__(self):  # a scan would iterate the whole list
        self.reads.append(len(self))
        return super().__iter__()


@pytest.mark.parametrize("count", [1, 3])
def test_lookup_reads_a_bounded_tail(count):
    """A key with 5,000 earlier occurrences: the lookup reads at most ``SCAN * count + 1``
    of its entries (not the text, not the whole list), and finds what a scan finds."""
    from specbound.llm.ngram import SCAN

    seq = [1, 2, 3, 0] * 2500 + [4, 1, 2]
    idx = NgramIndex(2, seq)
    lst = _CountingList(idx._ends[(1, 2)])
    lst.reads = []
    idx._ends[(1, 2)] = lst
    assert len(lst) == 2500
    assert idx.continuations(3, count) == naive_continuations(seq, 2, 3, count)
    assert sum(lst.reads) <= SCAN * count + 1


def test_break_even_solves_expected_tokens_equal_cost():
    from specbound.llm.ngram import break_even, expected_tokens, verify_cost

    assert break_even(0.9, 4) == 0.0 and break_even(1.0, 4) == 0.0
    assert np.isnan(break_even(5.5, 4))
    assert break_even(1.3, 1) == pytest.approx(0.3, abs=1e-15)  # k = 1: a = c - 1
    for k in (2, 4):
        for c in (1.2, 1.87, 2.19, k + 1.0):
            a = break_even(c, k)
            assert expected_tokens(a, k) == pytest.approx(c, abs=1e-12)
            assert expected_tokens(a - 1e-9, k) < c
    assert verify_cost(0, (0.5, 0.1)) == 1.0 and verify_cost(4, (0, 0.25)) == 2.0
    assert verify_cost(1, (0.5, 0.1)) == pytest.approx(1.6)
    assert verify_cost(2, (0.5, 0.25), B=2) == pytest.approx(1.5 + 0.25 * 5)


@given(st.floats(0.0, 1.0), st.integers(0, 8), st.sampled_from([0.0, 0.5, 1.0]),
       st.floats(0.0, 0.5), st.integers(1, 4), st.integers(2, 32))
def test_batch_gate_picks_the_best_length(a, bound, fixed, slope, B, rows):
    """``best_length`` in a batch of ``rows``: the k with the most batch tokens per cost of
    the widened forward when that beats every row's ar step, else 0 (brute force); with the
    default cost model a batch of 8 or more rows never drafts (even at acceptance 1)."""
    from specbound.llm.ngram import DEFAULT_COST, best_length, expected_tokens, forward_cost

    cost = (fixed, slope)
    k = best_length(a, bound, cost, B, rows)
    gains = [rows / forward_cost(rows, cost)] + [
        (rows - 1 + expected_tokens(a, j)) / forward_cost((rows - 1 + B) * (j + 1), cost)
        for j in range(1, bound + 1)]
    if cost == (0.0, 0.0):
        assert k == bound
    else:
        assert gains[k] == max(gains) and (k == 0 or gains[k] > gains[0])
    if rows >= 8:
        assert best_length(1.0, bound, DEFAULT_COST, B, rows) == 0


@given(st.floats(0.0, 1.0), st.integers(0, 8), st.sampled_from([0.0, 0.5, 1.0]),
       st.floats(0.0, 1.5), st.integers(1, 4))
def test_gate_picks_the_best_length(a, bound, fixed, slope, B):
    """``best_length``: the k of 1..bound with the largest tokens per cost when it beats an
    ar step (ratio 1), else 0; without a fixed overhead and for B = 1 it drafts exactly when
    ``a > slope`` (the break-even acceptance of one drafted token; longer blocks never pay
    below it: ``E_k(a) <= 1 + k a``)."""
    from specbound.llm.ngram import best_length, expected_tokens, verify_cost

    cost = (fixed, slope)
    k = best_length(a, bound, cost, B)
    gains = [1.0] + [expected_tokens(a, j) / verify_cost(j, cost, B) for j in
                     range(1, bound + 1)]
    if cost == (0.0, 0.0):
        assert k == bound
    else:
        assert gains[k] == max(gains) and (k == 0 or gains[k] > 1.0)
        if B == 1 and bound >= 1 and fixed == 0:
            assert (k > 0) == (a > slope)


def test_gate_closes_scores_ar_steps_and_reopens():
    """cost (0, 0.4): the prior (0.45) drafts; rejected proposals close the gate (ar steps),
    whose tokens are still scored against the proposal; a repeating text reopens it."""
    d = NgramDrafter(1, None, 10, cost=(0.0, 0.4))
    d.reset([1, 2])
    seen = []
    for t in [3, 4, 5, 6, 7, 8]:
        d.extend([1])  # the proposal: what followed the last earlier 1 (2, then 3, 4, ...)
        seen.append(d.plan(4, 1))
        d.extend([t])  # never the proposal: a rejection (scored whether drafted or not)
    assert seen[0] == 1 and seen[-1] == 0 and d.estimate.value < 0.4
    before = (d.estimate.accepted, d.estimate.decisions)
    d.extend([1])
    assert d.plan(4, 1) == 0
    d.extend([8])  # the ar step's token equals the proposal (8): scored as accepted
    decay = 1 - 1 / 32
    assert d.estimate.accepted == pytest.approx(before[0] * decay + 1)
    assert d.estimate.decisions == pytest.approx(before[1] * decay + 1)
    for _ in range(40):
        d.extend([1])
        k = d.plan(4, 1)
        d.extend([2])
    assert k >= 1 and d.estimate.value > 0.4


def test_default_gate_starts_closed_and_opens_on_a_confirmed_proposal():
    """At the prior no block length pays under the default cost model (the first match is
    scored on an ar step); one accepted proposal opens the gate."""
    from specbound.llm.ngram import DEFAULT_COST, PRIOR, best_length

    assert all(best_length(PRIOR, b, DEFAULT_COST) == 0 for b in range(1, 9))
    d = NgramDrafter(1, None, 10)
    d.reset([1, 2, 3])
    d.extend([1])
    assert d.plan(4, 1) == 0  # a match (1 -> 2), declined at the prior
    d.extend([2])  # the ar step's token was the proposal
    d.extend([1])
    assert d.plan(4, 1) >= 1


def test_drafter_laws_are_point_masses_and_mixtures():
    d = NgramDrafter(2, None, 10, cost=(0, 0))  # no gate: every match drafted in full
    d.reset([5, 6, 1, 5, 6, 2, 5, 6])
    assert d.plan(4, 1) == 3  # the most recent occurrence is followed by 2, 5, 6
    q = d.laws([(), (2,), (2, 5)])
    assert q[0, 2] == 1.0 and q[1, 5] == 1.0 and q[2, 6] == 1.0 and q.sum() == 3.0
    assert d.plan(2, 2) == 2
    q = d.laws([(), (1,), (2,)])
    np.testing.assert_array_equal(q[0, [1, 2]], [0.5, 0.5])
    assert q[1, 5] == 1.0 and q[2, 5] == 1.0
    d.extend([9])
    assert d.plan(4, 2) == 0  # (6, 9) never occurred


def test_each_draft_is_one_distinct_continuation():
    """laws_each: draft b is the point mass on continuation b mod m along its own path."""
    d = NgramDrafter(2, None, 10, cost=(0, 0))
    d.reset([5, 6, 1, 3, 5, 6, 2, 4, 5, 6])
    assert d.plan(2, 3) == 2  # continuations (2, 4) then (1, 3): m = 2 < B = 3
    q = d.laws_each([(), (), ()])
    assert q[0, 2] == 1.0 and q[1, 1] == 1.0 and q[2, 2] == 1.0 and q.sum() == 3.0
    q = d.laws_each([(2,), (1,), (2,)])
    assert q[0, 4] == 1.0 and q[1, 3] == 1.0 and q[2, 4] == 1.0
    assert np.allclose(d.laws_each([(1,), (2,), (7,)]), 1 / 10)  # off its own path


def _ref_specinfer_law(p, qs):
    """The emitted law of recursive rejection over independent candidates ``x_i ~ qs[i]``:
    ``min(q_i, r) + (1 - sum min(q_i, r)) * law(rest)`` (the residual after a rejection does
    not depend on the rejected token), the last residual when all are rejected."""
    r = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(r)
    stay = 1.0
    for q in qs:
        acc = np.minimum(q, r)
        out += stay * acc
        stay *= 1.0 - acc.sum()
        w = np.maximum(r - q, 0.0)
        r = w / w.sum() if w.sum() > 0 else r
    return out + stay * r


def test_specinfer_over_drafts_of_different_laws_emits_the_target():
    """The recursive rejection over drafts of different laws (sim.decode._specinfer_each)
    emits p: its analytic law (every step's ``min(q_i, r)`` plus the rejected mass on the
    rest) is p for three drafts of different laws; 20,000 runs with candidates drawn from
    their laws follow p (goodness of fit, false-failure probability FAILURE_RATE), and with
    identical laws it takes the kernel's decisions on the same uniforms."""
    from specbound.sim import _kernels as K
    from specbound.sim.decode import _specinfer_each

    rng = np.random.default_rng(7)
    p = rng.dirichlet(np.ones(6))
    qs = [rng.dirichlet(np.ones(6)), np.eye(6)[2], rng.dirichlet(0.3 * np.ones(6))]
    np.testing.assert_allclose(_ref_specinfer_law(p, qs), p, atol=1e-12)
    n = 20000
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        cands = np.array([rng.choice(6, p=q) for q in qs], dtype=np.int64)
        out[i] = _specinfer_each(p, qs, cands, rng.random(3), rng.random())[0]
    assert_gof(out, p, samples=True, alpha=FAILURE_RATE, label="specinfer, per-draft laws")
    q = qs[0]
    for _ in range(200):
        cands = rng.choice(6, size=2, p=q)
        u, v = rng.random(2), rng.random()
        got = _specinfer_each(p, [q, q], cands, u, v)
        want = K.specinfer_verify(p, q, cands, u, v)
        assert (int(got[0]), bool(got[1])) == (int(want[0]), bool(want[1]))


# ----------------------------------------------------------------------------- synthetic


@pytest.fixture(scope="module")
def synth():
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12, temperature=1.3)
    pair = synthetic_pair(target, draft)
    return target, pair, pair.with_draft("ngram:2"), pair.with_draft("ngram:2:fixed=0:cost=0")


# repeats (3, 1) and (1, 4): the lookup succeeds at the prompt's end
REP = np.array([3, 1, 4, 1, 5, 9, 2, 6, 3, 1, 4, 1, 5, 3, 1], dtype=np.int64)
# two occurrences of (7, 8) with different continuations
MULTI = np.array([7, 8, 2, 4, 5, 7, 8, 9, 6, 0, 7, 8], dtype=np.int64)


def test_no_draft_forward_and_blocks_follow_the_lookup(synth):
    _, base, _, pair = synth  # no gate: every block with a match drafts
    pair.target.calls.clear()
    res = G.generate(pair, REP, "vsps", L=4, max_new_tokens=30, seed=1)
    assert pair.draft is pair.target  # the stand-in, never called for the draft
    assert res.n_target_evals == res.emitted_per_block.size
    # every forward of the (only) module is a prefill or a verification
    assert len(pair.target.calls) == res.n_target_evals + 1
    assert res.drafts[0].shape == (1, 4)  # (3, 1) was followed by 4, 1, 5, 3, 1: ell = L
    drafted = [d.shape[1] for d in res.drafts]
    assert all(0 <= k <= 4 for k in drafted)
    assert all(e <= k + 1 for e, k in zip(res.emitted_per_block, drafted, strict=True))
    assert res.n_generated == 30


def test_no_occurrence_is_an_ar_step(synth):
    _, _, pair, _ = synth
    prompt = np.arange(V, dtype=np.int64)  # no bigram repeats
    res = G.generate(pair, prompt, "vsps", L=4, max_new_tokens=1, seed=1)
    assert res.drafts[0].shape == (1, 0) and res.nu.size == 0
    assert res.emitted_per_block.tolist() == [1] and res.n_draft_evals == 0


@pytest.mark.parametrize("decoder,B", [("mpfr", 2), ("specinfer", 3), ("invariant", 2)])
def test_multi_drafts_are_the_distinct_continuations(synth, decoder, B):
    """With B > 1 the first block's drafts are the two distinct continuations of (7, 8) in
    MULTI (most recent first; a third draft repeats the first), never two equal drafts, and
    the result says the drafts had laws of their own."""
    _, _, _, pair = synth
    res = G.generate(pair, MULTI, decoder, L=3, B=B, key=5, seed=3, max_new_tokens=4,
                     stop_at_eos=False)
    first = {tuple(r) for r in res.drafts[0].tolist()}
    assert first == {(9, 6, 0), (2, 4, 5)}
    if decoder != "mpfr":  # mpfr records the tree's leaves sorted
        assert [tuple(r) for r in res.drafts[0].tolist()][:2] == [(9, 6, 0), (2, 4, 5)]
    assert res.per_draft and res.nu[0] == B
    ref = G.generate(pair, MULTI, "vsps", L=3, key=5, seed=3, max_new_tokens=4,
                     stop_at_eos=False)
    assert not ref.per_draft


def test_per_draft_acceptance_is_p_of_the_proposed_tokens(synth):
    """mpfr B = 2 with the two distinct continuations: every decision's theory acceptance is
    p of the tokens the drafts propose at its context (the support of the recorded mixture),
    and over 12 runs the realised acceptances match it (z-score of the summed martingale
    differences within 5: false failure 5.7e-7)."""
    _, _, _, pair = synth
    diff = var = 0.0
    n_dec = 0
    for seed in range(12):
        rec = llm.ContextRecorder()
        res = G.generate(pair, MULTI, "mpfr", L=3, B=2, key=seed, max_new_tokens=30,
                         window=None, stop_at_eos=False, log=rec, prompt_id=2)
        dec = llm.decision_acceptance(res, rec, prompt_id=2)
        assert res.per_draft and len(dec) == res.nu.size
        for j, pos in enumerate(res.decision_position):
            p, q = rec.pair(2, res.tokens[:res.prompt_length + int(pos)])
            assert dec["predicted"].iloc[j] == pytest.approx(p[q > 0].sum(), abs=1e-9)
        pred = dec["predicted"].to_numpy()
        diff += float((dec["accepted"].to_numpy() - pred).sum())
        var += float((pred * (1 - pred)).sum())
        n_dec += len(dec)
    assert n_dec > 30 and (dec["nu"] == 2).any()
    assert abs(diff) <= 5 * np.sqrt(var), (diff, var, n_dec)


@pytest.mark.parametrize("decoder,B,gate", [("pfr", 1, True), ("mpfr", 2, False),
                                            ("mpfr", 3, True)])
def test_keyed_drafter_invariance(synth, decoder, B, gate):
    """pfr / mpfr emit basic_uwm's tokens under one key with the n-gram draft (gated or
    not), as with a model draft (Liu, Wan, Gao & Gündüz 2026, Prop. C.3)."""
    _, base, gated, free = synth
    pair = gated if gate else free
    kw = dict(key=31, window=3, max_new_tokens=24, stop_at_eos=False)
    ref = G.generate(base, MULTI, "basic_uwm", **kw)
    got = G.generate(pair, MULTI, decoder, L=3, B=B, **kw)
    other = G.generate(base, MULTI, decoder, L=3, B=B, **kw)
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    np.testing.assert_array_equal(other.tokens, ref.tokens)
    np.testing.assert_array_equal(got.pivots, ref.pivots)


@pytest.mark.parametrize("decoder,B", [("vsps", 1), ("mpfr", 2),
                                       pytest.param("specinfer", 2, marks=pytest.mark.slow)])
def test_batch_and_custom_generate_equal_generate(synth, decoder, B):
    from tests.test_llm_batch import _synthetic_pair as batch_pair

    target, base, pair, _ = synth
    kw = dict(L=3, B=B, key=4, max_new_tokens=12, stop_at_eos=False)
    bp = batch_pair(target, target)  # modules with transformers-like ragged caches
    # a keyed decoder's tokens do not depend on the block lengths, so its rows equal
    # generate's under the batch-priced gate too; unkeyed rows do with the one-row gate
    gate = sim.decoders.DECODER_SPECS[decoder].keyed
    batch = llm.generate_batch(bp, [REP, MULTI], decoder, draft="ngram:2", seed=[5, 6],
                               batch_gate=gate, **kw)
    assert batch.n_draft_forwards == 0
    for seed, prompt, row in zip([5, 6], [REP, MULTI], batch, strict=True):
        ref = G.generate(bp.with_draft("ngram:2"), prompt, decoder, seed=seed, **kw)
        np.testing.assert_array_equal(row.tokens, ref.tokens)
        np.testing.assert_array_equal(row.emitted_per_block, ref.emitted_per_block)
    from transformers import GenerationConfig, StoppingCriteriaList
    from transformers.generation.stopping_criteria import MaxLengthCriteria

    ids = torch.as_tensor(MULTI)[None]
    out = llm.custom_generate(
        base.target, ids, stopping_criteria=StoppingCriteriaList([MaxLengthCriteria(
            ids.shape[1] + 12)]), generation_config=GenerationConfig(max_new_tokens=12),
        draft="ngram:2", decoder=decoder, seed=5, **{k: v for k, v in kw.items()
                                                      if k != "max_new_tokens"})
    ref = G.generate(pair, MULTI, decoder, seed=5, **kw)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)


def test_batch_gate_prices_the_widened_batch(synth):
    """A gate that drafts at the prior for one sequence (cost (0.3, 0.1)) declines in a batch
    of 4 live rows (the batched break-even; ``best_length`` with rows = 4) and drafts again
    with ``batch_gate=False``, whose rows are generate's."""
    from tests.test_llm_batch import _synthetic_pair as batch_pair

    target = synth[0]
    bp = batch_pair(target, target)
    spec = "ngram:2:fixed=0.3:cost=0.1"
    kw = dict(L=3, max_new_tokens=3, stop_at_eos=False, seed=[1, 2, 3, 4])
    one = G.generate(bp.with_draft(spec), REP, "vsps", L=3, max_new_tokens=3, seed=1,
                     stop_at_eos=False)
    assert one.drafts[0].shape[1] >= 1
    gated = llm.generate_batch(bp, [REP] * 4, "vsps", draft=spec, **kw)
    assert all(d.shape[1] == 0 for r in gated for d in r.drafts)
    free = llm.generate_batch(bp, [REP] * 4, "vsps", draft=spec, batch_gate=False, **kw)
    assert free[0].drafts[0].shape[1] >= 1
    np.testing.assert_array_equal(free[0].tokens, one.tokens)
    with pytest.raises(ValueError, match="^batch_gate"):
        llm.generate_batch(bp, [REP], "vsps", draft=spec, batch_gate="yes", max_new_tokens=1)


class _NgramSynthBackend(SyntheticBackend):
    """The simulator's backend with an n-gram draft (the laws of :class:`PairBackend`'s)."""

    def __init__(self, target, n, k=None, cost=None, min_n=None):
        super().__init__(target, target)
        self.ng = NgramDrafter(n, k, target.vocab_size, cost, min_n)

    def reset(self, prompt):
        super().reset(prompt)
        self.ng.reset(prompt)

    def block_length(self, ell, B=1):
        return self.ng.plan(ell, B)

    per_draft_laws = True

    def draft_step(self, paths):
        return self.ng.laws(paths)

    def draft_step_each(self, paths):
        return self.ng.laws_each(paths)

    def commit(self, tokens):
        super().commit(tokens)
        self.ng.extend(tokens)


SYNTH_RUNS = 3000
#: (decoder, B, prompt, gate cost model): (0, 0) drafts every match; (0.3, 0.1) drafts at
#: the prior; at (0, 0.45) the first block is an ar step (the prior does not clear the
#: break-even) and the second drafts or not depending on whether its token was the proposal
SYNTH_CASES = [("vsps", 1, REP, (0.3, 0.1)), ("vsps", 1, REP, (0.0, 0.45)),
               ("specinfer", 2, MULTI, (0.0, 0.0)), ("mpfr", 2, MULTI, (0.0, 0.0)),
               ("invariant", 2, MULTI, (0.0, 0.0)), ("pfr", 1, REP, None)]


def _spec(n, cost):
    return (f"ngram:{n}" if cost is None
            else f"ngram:{n}:fixed={cost[0]:g}:cost={cost[1]:g}")


@pytest.mark.slow
def test_first_two_tokens_follow_the_target(synth):
    """The joint law of the first two emitted tokens is the target's (n-gram drafts accept
    or reject inside the first block, so both a decision and a residual draw are tested; with
    the gate at cost (0, 0.45) whether the second block drafts depends on the first token).
    Five configurations, false-failure probability FAILURE_RATE together (Bonferroni)."""
    target, base, _, _ = synth
    alpha = bonferroni(len(SYNTH_CASES), FAILURE_RATE)
    cached = sim.CachedLM(target)
    for decoder, B, prompt, cost in SYNTH_CASES:
        pair = base.with_draft(_spec(2, cost))
        p1 = target.next_distribution(prompt)
        joint = np.concatenate([p1[a] * target.next_distribution(np.append(prompt, a))
                                for a in range(V)])
        first = np.empty(SYNTH_RUNS, dtype=np.int64)
        for i in range(SYNTH_RUNS):
            r = sim.speculative_decode(cached, cached, prompt, decoder, L=3, B=B, key=i,
                                       seed=i, window=3, max_new_tokens=2,
                                       backend=_NgramSynthBackend(cached, 2, cost=cost))
            first[i] = r.generated[0] * V + r.generated[1]
        g = G.generate(pair, prompt, decoder, L=3, B=B, key=0, seed=0, window=3,
                       max_new_tokens=2, stop_at_eos=False)
        assert g.generated[0] * V + g.generated[1] == first[0]
        assert_gof(first, joint, samples=True, alpha=alpha, label=decoder)


def test_point_mass_acceptance_is_p_of_the_drafted_token(synth):
    """The theory's acceptance of a vsps decision with a point-mass draft is ``p(x)`` of the
    drafted token ``x`` (1 - TV(p, one-hot)), decision by decision, from the recorded laws;
    over 10 runs the realised acceptances match it (z-score of the summed martingale
    differences within 5: false failure 5.7e-7)."""
    _, _, _, pair = synth
    diff = var = 0.0
    n_dec = 0
    for seed in range(10):
        rec = llm.ContextRecorder()
        res = G.generate(pair, REP, "vsps", L=4, max_new_tokens=40, seed=seed, window=None,
                         log=rec, prompt_id=1)
        dec = llm.decision_acceptance(res, rec, prompt_id=1)
        assert len(dec) == res.nu.size
        k = 0
        for b, drafted in enumerate(res.drafts):
            ctx = list(res.tokens[:res.prompt_length + int(res.emitted_per_block[:b].sum())])
            for s in range(min(drafted.shape[1], int(res.emitted_per_block[b]))):
                p, q = rec.pair(1, ctx + list(drafted[0, :s]))
                assert np.count_nonzero(q) == 1 and q.max() == 1.0  # a point mass
                assert dec["predicted"].iloc[k] == pytest.approx(p[np.argmax(q)], abs=1e-12)
                k += 1
        assert k == len(dec)
        pred = dec["predicted"].to_numpy()
        diff += float((dec["accepted"].to_numpy() - pred).sum())
        var += float((pred * (1 - pred)).sum())
        n_dec += k
    assert n_dec > 50
    assert abs(diff) <= 5 * np.sqrt(var), (diff, var, n_dec)


# ----------------------------------------------------------------------------- embedded


EMBED_TEXT = ("x = add(a, b)\ny = add(c, d)\nz = add(a, b)\nw = add(")


@pytest.fixture(scope="module")
def embed_ids(llm_pair):
    return np.asarray(llm_pair.tokenizer(EMBED_TEXT)["input_ids"], dtype=np.int64)


EMBED_RUNS = 1500


@pytest.mark.slow
def test_first_token_follows_the_target_on_the_embedded_model(llm_pair, embed_ids):
    """vsps, specinfer B = 2 and mpfr B = 2 with ``ngram:3`` at a prompt whose last 3 tokens
    occurred twice with different continuations: the first token follows the target's law.
    Three configurations, false-failure probability FAILURE_RATE together (Bonferroni); the
    target's laws come from the pair's uncached model (equal to the cached backend's, tested
    in test_llm_generate) through ``CachedLM``; one run per configuration goes through
    ``generate`` to tie the two paths."""
    t_lm, _ = G.as_protocol_models(llm_pair)
    target = sim.CachedLM(t_lm)
    p = target.next_distribution(embed_ids)
    probe = NgramDrafter(3, None, llm_pair.vocab_size, cost=(0, 0))
    probe.reset(embed_ids)
    assert probe.plan(2, 2) >= 1 and len(probe.index.continuations(1, 2)) == 2
    alpha = bonferroni(3, FAILURE_RATE)
    # vsps with a gate whose one-token block pays at the prior (one new token caps the block
    # at one draft, which the default model's fixed overhead declines); B = 2 without the
    # gate (at the prior a two-row block does not pay, so the gated run would be an ar step)
    for decoder, B, cost in (("vsps", 1, (0.0, 0.4)), ("specinfer", 2, (0.0, 0.0)),
                             ("mpfr", 2, (0.0, 0.0))):
        pair = llm_pair.with_draft(_spec(3, cost))
        first = np.empty(EMBED_RUNS, dtype=np.int64)
        for i in range(EMBED_RUNS):
            r = sim.speculative_decode(target, target, embed_ids, decoder, L=2, B=B, key=i,
                                       seed=i, window=4, max_new_tokens=1,
                                       backend=_NgramSynthBackend(target, 3, cost=cost))
            first[i] = r.generated[0]
            if i == 0:
                assert r.drafts[0].shape[1] >= 1  # the block drafted
        g = G.generate(pair, embed_ids, decoder, L=2, B=B, key=0, seed=0, max_new_tokens=1)
        assert g.generated[0] == first[0]
        assert_gof(first, p, samples=True, alpha=alpha, label=decoder)


@pytest.mark.slow
def test_keyed_drafter_invariance_on_the_embedded_model(llm_pair, embed_ids):
    """pfr with ``ngram:3`` (gated) and mpfr B = 2 with ``ngram:3:fixed=0:cost=0`` (every match
    drafted) emit the tokens of the ``temperature:1.5`` draft under the same key (and
    basic_uwm's)."""
    kw = dict(key=2026, window=4, max_new_tokens=12, stop_at_eos=False)
    ref = G.generate(llm_pair, embed_ids, "basic_uwm", **kw)
    for decoder, B, draft in (("pfr", 1, "ngram:3"), ("mpfr", 2, "ngram:3:fixed=0:cost=0")):
        a = G.generate(llm_pair, embed_ids, decoder, L=3, B=B, draft=draft, **kw)
        b = G.generate(llm_pair, embed_ids, decoder, L=3, B=B, **kw)
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_array_equal(a.tokens, ref.tokens)
        assert any(d.shape[1] > 0 for d in a.drafts)  # the lookup drafted
    assert (a.emitted_per_block > 1).any()  # and was accepted (ungated mpfr)


#: the last 3 tokens ``g(alpha`` never occurred; the 2-gram ``(alpha`` did, followed by ``,``
#: (the target gives ``,`` about 0.49 and `` +`` about 0.38 here)
BACKOFF_TEXT = "def f(alpha, beta):\n    return g(alpha"
ADAPTIVE_RUNS = 1500


@pytest.mark.slow
def test_adaptive_gate_and_backoff_follow_the_target_on_the_embedded_model(llm_pair):
    """The gate's decisions depend on the tokens already emitted and still leave the target's
    law (vsps on the embedded model, the target's laws through ``CachedLM`` as above):

    - ``ngram:2:min=1`` at cost (0, 0.45): the prior (0.45) does not clear the break-even,
      so the first block is an ``ar`` step whose token is scored against the looked-up ``,``;
      where it was ``,`` the 2-gram estimate rises above the break-even and the second block
      drafts the continuation (`` beta``), else it stays an ``ar`` step.  Tested: the first
      token's law, and the second token's law given each of the two likeliest first tokens
      (one drafted, one not: the gate adapted);
    - ``ngram:3:min=1`` at cost (0, 0.3) (drafts at the prior): the 3-gram has no earlier
      occurrence, the block drafts the 2-gram's continuation; the first token's law.

    Four comparisons, false-failure probability FAILURE_RATE together (Bonferroni)."""
    ids = np.asarray(llm_pair.tokenizer(BACKOFF_TEXT)["input_ids"], dtype=np.int64)
    t_lm, _ = G.as_protocol_models(llm_pair)
    target = sim.CachedLM(t_lm)
    p = target.next_distribution(ids)
    probe = NgramIndex(3, ids, min_n=1)
    m, conts = probe.match(2)
    assert m == 2 and NgramIndex(3, ids).match(2) == (0, [])  # a back-off match only
    alpha = bonferroni(4, FAILURE_RATE)
    runs = {}
    for spec, n, n0, cost, new in (("ngram:2:min=1", 2, 1, (0.0, 0.45), 2),
                                   ("ngram:3:min=1", 3, 1, (0.0, 0.3), 1)):
        out = []
        for i in range(ADAPTIVE_RUNS):
            r = sim.speculative_decode(target, target, ids, "vsps", L=3, key=i, seed=i,
                                       window=4, max_new_tokens=new,
                                       backend=_NgramSynthBackend(target, n, cost=cost,
                                                                  min_n=n0))
            out.append((tuple(int(t) for t in r.generated[:new]),
                        tuple(d.shape[1] for d in r.drafts)))
        pair = llm_pair.with_draft(f"{spec}:fixed={cost[0]:g}:cost={cost[1]:g}")
        g = G.generate(pair, ids, "vsps", L=3, key=0, seed=0, window=4, max_new_tokens=new,
                       stop_at_eos=False)
        assert tuple(int(t) for t in g.generated[:new]) == out[0][0]
        runs[spec] = out
    first = np.array([o[0][0] for o in runs["ngram:3:min=1"]])
    assert all(o[1][0] >= 1 for o in runs["ngram:3:min=1"])  # every first block drafted
    assert_gof(first, p, samples=True, alpha=alpha, label="back-off, first token")
    out = runs["ngram:2:min=1"]
    assert all(o[1][0] == 0 for o in out)  # the first block: an ar step at the prior
    first = np.array([o[0][0] for o in out])
    assert_gof(first, p, samples=True, alpha=alpha, label="adaptive gate, first token")
    proposal = conts[0][0]
    for x in np.argsort(p)[::-1][:2]:
        given = [o for o in out if o[0][0] == x]
        assert len(given) > 300
        # the second block drafted exactly where the first token was the proposal
        assert all((len(o[1]) > 1 and o[1][1] >= 1) == (x == proposal) for o in given)
        second = np.array([o[0][1] for o in given])
        assert_gof(second, target.next_distribution(np.append(ids, x)), samples=True,
                   alpha=alpha, label=f"adaptive gate, second token after {x}")
