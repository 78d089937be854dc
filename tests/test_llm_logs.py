"""Logged real distributions (specbound.llm.logs): writer, reader, resume, the shipped log.

The writer/reader tests use synthetic distributions (no torch); the shipped-log tests read
the committed log (no torch); the logging test runs the embedded model on CPU (a few
seconds); the reproduction of the shipped log is in the slow tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specbound import llm
from specbound.llm.logs import CONTEXTS, DistributionLog, read_log, shipped_log, sparse_top
from specbound.sim import estimate_acceptance
from specbound.theory import exact_acceptance, tv_distance

from ._stats import FIVE_SIGMA_RATE

REPO = Path(__file__).resolve().parents[1]
V = 40


def _dist(rng, k=None):
    """A random distribution over V tokens, with k non-zero entries (all when None)."""
    p = rng.dirichlet(np.full(V, 0.3))
    if k is not None:
        p[np.argsort(p)[: V - k]] = 0.0
        p /= p.sum()
    return p


def _settings(**kw):
    base = dict(vocab_size=V, drafts=["a", "b"], target_model="toy",
                processing={"temperature": 1.0, "top_k": None, "top_p": None},
                decoder="ar", prompts=["x", "y", "z"])
    base.update(kw)
    return base


def _write(path, rng, prompts=(0, 1, 2), steps=5, k=None, **kw):
    """Log ``steps`` contexts per prompt; return what was recorded."""
    rec = []
    with DistributionLog(path, **_settings(**kw)) as log:
        for pid in prompts:
            ctx = list(rng.integers(0, V, size=3))
            for _ in range(steps):
                p, qa, qb = _dist(rng, k), _dist(rng, k), _dist(rng, k)
                log.record(pid, ctx, p, [qa, qb])
                rec.append((pid, list(ctx), p, qa, qb))
                ctx.append(int(rng.integers(0, V)))
    return rec


def test_round_trip_exact_when_everything_is_stored(tmp_path):
    rng = np.random.default_rng(1)
    rec = _write(tmp_path / "log", rng, k=12)
    log = read_log(tmp_path / "log")
    assert len(log) == len(rec) == 15 and log.prompt_ids == [0, 1, 2]
    assert log.drafts == ["a", "b"] and log.vocab_size == V
    assert log.meta["prompts"] == {"0": "x", "1": "y", "2": "z"}
    for got, (_, ctx, *_rest) in zip(log.contexts(), rec, strict=True):
        assert got.tolist() == ctx
    for d, col in (("a", 3), ("b", 4)):
        assert log[d].meta["draft_model"] == d and log[d].complete
        dense = log[d].dense(0, len(log), tail="spread")
        for i, lp in enumerate(log.pairs(d)):
            p, q = rec[i][2], rec[i][col]
            assert lp.exact and lp.prompt_id == rec[i][0]
            # float32 storage: within 1e-6 after renormalisation
            np.testing.assert_allclose(dense.p[i], p, atol=1e-6)
            np.testing.assert_allclose(dense.q[i], q, atol=1e-6)
            full_p, full_q = np.zeros(V), np.zeros(V)
            full_p[lp.tokens], full_q[lp.tokens] = lp.p, lp.q
            np.testing.assert_allclose(full_p, p, atol=1e-6)
            np.testing.assert_allclose(full_q, q, atol=1e-6)
            assert abs(tv_distance(lp.p, lp.q) - tv_distance(p, q)) < 1e-6


def test_max_stored_keeps_the_top_and_the_tail(tmp_path):
    rng = np.random.default_rng(2)
    p = _dist(rng)
    idx, val, tail = sparse_top(p, 5)
    top = np.sort(np.argsort(-p, kind="stable")[:5])
    assert idx.tolist() == top.tolist()
    assert tail == pytest.approx(1 - p[top].sum(), abs=1e-15)
    rec = _write(tmp_path / "log", rng, max_stored=5)
    log = read_log(tmp_path / "log")
    pairs = list(log.pairs("a"))
    assert not any(lp.exact for lp in pairs)
    for lp, (_, _, p, qa, _) in zip(pairs, rec, strict=True):
        # the OTHER coarsening: a lower bound on TV within min of the OTHER masses
        tv = tv_distance(p, qa)
        low = tv_distance(lp.p, lp.q)
        assert low <= tv + 1e-6 and tv <= low + min(lp.p[-1], lp.q[-1]) + 1e-6
        assert lp.tokens[-1] == -1


def test_resume_after_a_crash_keeps_whole_prompts(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "log"
    log = DistributionLog(path, **_settings())
    for pid in (0, 1):
        for s in range(4):
            log.record(pid, [1, 2, 3 + s], _dist(rng), [_dist(rng), _dist(rng)])
    log.flush()
    # a crash after the sub-logs committed prompt 2 but before its contexts line:
    for s in range(3):
        log.record(2, [5, s], _dist(rng), [_dist(rng), _dist(rng)])
    for w in log._writers:
        for (_, (pi, pv, _pt), sq) in log._buf:
            w.append(2, pi, pv, sq[0][0], sq[0][1])
        w.flush()
    # ... and a torn half line in contexts.jsonl
    with open(path / CONTEXTS, "ab") as fh:
        fh.write(b'{"prompt_id": 2, "posi')
    del log
    with pytest.raises(ValueError, match="resume"):
        DistributionLog(path, **_settings(decoder="vsps"), resume=True)
    with pytest.raises(ValueError, match="already holds a log"):
        DistributionLog(path, **_settings())
    log = DistributionLog(path, **_settings(), resume=True)
    assert log.prompt_ids == {0, 1} and len(log) == 8
    with pytest.raises(ValueError, match="prompt_id: prompt 1 is already committed"):
        log.record(1, [1], _dist(rng), [_dist(rng), _dist(rng)])
    for s in range(2):
        log.record(2, [7, s], _dist(rng), [_dist(rng), _dist(rng)])
    log.close()
    r = read_log(path)
    assert len(r) == 10 and r.prompt_ids == [0, 1, 2]
    assert r["a"].step.tolist() == [0, 1, 2, 3] * 2 + [0, 1]
    assert [c.tolist() for c in r.contexts()][-2:] == [[7, 0], [7, 1]]


def test_bad_input_names_the_argument(tmp_path):
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="drafts"):
        DistributionLog(tmp_path / "x", **_settings(drafts=[]))
    with pytest.raises(ValueError, match="drafts"):
        DistributionLog(tmp_path / "x", **_settings(drafts=["a", "a"]))
    with pytest.raises(ValueError, match="vocab_size"):
        DistributionLog(tmp_path / "x", **_settings(vocab_size=0))
    log = DistributionLog(tmp_path / "y", **_settings())
    p = _dist(rng)
    with pytest.raises(ValueError, match="qs"):
        log.record(0, [1], p, [p])
    with pytest.raises(ValueError, match=r"qs\[1\]"):
        log.record(0, [1], p, [p, np.ones(V)])
    with pytest.raises(ValueError, match="p: must have shape"):
        log.record(0, [1], p[:-1], [p, p])
    with pytest.raises(ValueError, match="context_tokens"):
        log.record(0, [], p, [p, p])
    with pytest.raises(ValueError, match="prompt_id"):
        log.record(-1, [1], p, [p, p])
    with pytest.raises(ValueError, match="draft"):
        log.close() or read_log(tmp_path / "y")["c"]
    with pytest.raises(ValueError, match="path"):
        read_log(tmp_path / "nothing")


# ----------------------------------------------------------------------------- shipped log


@pytest.fixture(scope="module")
def shipped():
    return shipped_log()


def test_shipped_log_loads_and_validates(shipped):
    assert len(shipped) >= 300 and len(shipped.prompt_ids) == 12
    assert shipped.drafts == ["temperature:0.5", "temperature:1.5", "early_exit:28",
                              "quantized:3"]
    m = shipped.meta
    assert m["target_model"] == "SmolLM2-135M-Instruct" and m["vocab_size"] == 49152
    assert m["processing"] == {"temperature": 1.0, "top_k": 50, "top_p": None}
    assert m["decoder"] == "ar" and m["key_id"] is None
    total = sum(f.stat().st_size for f in shipped.path.rglob("*") if f.is_file())
    assert total <= 5 * 2**20
    ctx = shipped.contexts()
    assert len(ctx) == len(shipped)
    # every context of a prompt extends the previous one by one token (the sampled text)
    steps = np.asarray(shipped["quantized:3"].step)
    for i in range(1, len(ctx)):
        if steps[i]:
            assert len(ctx[i]) == len(ctx[i - 1]) + 1
            assert ctx[i][:-1].tolist() == ctx[i - 1].tolist()
    # top-k 50 processing: every tail is 0, the target stores at most 50 (+ ties) tokens
    for d in shipped.drafts:
        a = shipped[d].arrays()
        assert np.all(np.asarray(a["p_tail"]) == 0) and np.all(np.asarray(a["q_tail"]) == 0)
        assert np.diff(np.asarray(a["p_offsets"])).max() <= 52


def test_theory_on_the_shipped_log(shipped):
    """Exact SD acceptance on logged contexts is 1 - TV; the temperature drafts share the
    target's top-50 set; Monte Carlo on a few contexts agrees with the exact values."""
    one_minus_tv = {}
    for d in shipped.drafts:
        pairs = list(shipped.pairs(d))
        assert all(lp.exact for lp in pairs)
        tv = np.array([tv_distance(lp.p, lp.q) for lp in pairs])
        sd = np.array([exact_acceptance(lp.p, lp.q, "sd") for lp in pairs])
        np.testing.assert_allclose(sd, 1 - tv, atol=1e-12)
        one_minus_tv[d] = float(np.mean(1 - tv))
        if d.startswith("temperature"):
            assert all(lp.p.size <= 52 and np.all((lp.p > 0) == (lp.q > 0)) for lp in pairs)
    # the drafts were chosen to differ: far from each other except the two temperatures
    assert one_minus_tv["quantized:3"] < one_minus_tv["early_exit:28"] - 0.05
    assert one_minus_tv["early_exit:28"] < min(one_minus_tv["temperature:0.5"],
                                               one_minus_tv["temperature:1.5"]) - 0.1
    # Monte Carlo on 3 contexts: |z| < 5 each, false failure <= 3 * FIVE_SIGMA_RATE
    pairs = list(shipped.pairs("early_exit:28", 0, 40))
    for lp in pairs[::15]:
        exact = exact_acceptance(lp.p, lp.q, "mpfr", 2)
        est = estimate_acceptance(lp.p, lp.q, "mpfr", B=2, n=20_000, seed=lp.position)
        se = max(np.sqrt(exact * (1 - exact) / est.n), 1e-12)
        assert abs(est.mean - exact) < 5 * se, (lp.position, est, exact, FIVE_SIGMA_RATE)


# ----------------------------------------------------------------------------- real model


def test_log_distributions_on_the_embedded_model(tmp_path, llm_pair):
    from specbound.llm.logs import log_distributions

    texts = ["def add(a, b):", "Name three colours."]  # short prompts: cheap forwards
    pair = llm_pair.with_processing(top_k=20)
    kw = dict(drafts=["temperature:1", "temperature:0.5"], max_new_tokens=5, seed=7,
              path=tmp_path / "log")
    log = log_distributions(pair, texts[:1], **kw)
    assert len(log) == 5 and log.prompt_ids == [0]
    # the temperature:1 draft computes the target's logits: q == p exactly
    for lp in log.pairs("temperature:1"):
        assert lp.exact and np.array_equal(lp.p, lp.q)
    # resume: prompt 0 is skipped (same rows), prompt 1 is added
    before = {k: np.array(v) for k, v in log["temperature:0.5"].arrays().items()}
    log2 = log_distributions(pair, texts, **kw)
    assert log2.prompt_ids == [0, 1] and len(log2) == 10
    after = log2["temperature:0.5"].arrays()
    for k in ("p_idx", "p_val", "q_idx", "q_val"):
        n = before[k].shape[0]
        np.testing.assert_array_equal(np.asarray(after[k])[:n], before[k])
    # the logged p is the target's distribution at the logged context
    ctx = log2.contexts()
    p_direct = pair.next_token_probs([ctx[7]])[0]
    lp = list(log2.pairs("temperature:0.5", 7, 8))[0]
    full = np.zeros(pair.vocab_size)
    full[lp.tokens] = lp.p
    np.testing.assert_allclose(full, p_direct, atol=1e-5)
    # the same run in a fresh folder gives the same files (deterministic sampling)
    log3 = log_distributions(pair, texts[:1], **{**kw, "path": tmp_path / "again"})
    for k, v in log3["temperature:0.5"].arrays().items():
        n = np.asarray(v).shape[0]
        np.testing.assert_array_equal(np.asarray(v), np.asarray(after[k])[:n])
    assert json.loads((tmp_path / "log" / "manifest.json").read_text())["meta"][
        "processing"]["top_k"] == 20


@pytest.mark.slow
def test_make_log_reproduces_the_committed_files():
    proc = subprocess.run([sys.executable, "scripts/make_log.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "reproduced" in proc.stdout


def test_cli_log_writes_and_resumes(tmp_path, monkeypatch, capsys, llm_pair):
    from specbound import cli

    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    argv = ["log", "--out", str(tmp_path / "log"), "--sets", "humaneval", "--prompts", "1",
            "--max-new-tokens", "3", "--drafts", "temperature:0.5", "--quiet",
            "--max-stored", "64"]
    assert cli.main(argv) == 0
    assert "3 positions, 1 prompts, drafts temperature:0.5" in capsys.readouterr().out
    log = read_log(tmp_path / "log")
    assert log.meta["prompts"] == {"0": "humaneval prompts(n=1, seed=0)[0]"}
    # no top-k processing: 64 tokens stored, the rest is tail mass (the OTHER coarsening)
    assert not any(lp.exact for lp in log.pairs("temperature:0.5"))
    assert cli.main(argv) == 0  # resumed: nothing to add
    assert len(read_log(tmp_path / "log")) == 3
    assert cli.main([*argv, "--no-resume"]) == 2
    assert "already holds a log" in capsys.readouterr().err


def test_contexts_without_a_draft_go_to_the_target_only_sub_log(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "log"
    p0, p1 = _dist(rng, 6), _dist(rng, 6)
    log = DistributionLog(path, **_settings(), value_dtype="float64")
    log.record(0, [1, 2], p0, [_dist(rng), _dist(rng)])
    log.record(0, [1, 2, 3], p1, [])  # e.g. the bonus position after L accepted drafts
    log.flush()
    log.record(1, [4], _dist(rng), [])
    del log  # a crash: prompt 1 (target-only, buffered) is lost
    log = DistributionLog(path, **_settings(), value_dtype="float64", resume=True)
    assert log.prompt_ids == {0}
    log.record(1, [4, 4], p0, [])
    log.close()
    r = read_log(path)
    assert len(r) == 1 and len(r.target_only) == 2
    assert [c.tolist() for c in r.contexts("target_only")] == [[1, 2, 3], [4, 4]]
    target, draft = r.replay("a")
    np.testing.assert_array_equal(target.next_distribution([1, 2, 3]), p1)  # float64: exact
    np.testing.assert_array_equal(target.next_distribution([4, 4]), p0)
    assert draft.next_distribution([1, 2]).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="context"):
        draft.next_distribution([1, 2, 3])
    with pytest.raises(ValueError, match="which"):
        r.contexts("other")


@pytest.mark.parametrize("decoder,B", [("vsps", 1), ("pfr", 1), ("mpfr", 2)])
def test_a_logged_generate_run_replays_through_the_simulator(tmp_path, llm_pair, decoder, B):
    """generate(..., log=DistributionLog) records every verified context; the simulator's
    decoder on models that serve the logged distributions emits the same tokens."""
    from specbound.llm import generation as gen
    from specbound.sim import speculative_decode

    pair = llm_pair.with_processing(top_k=20)  # every tail 0: the log is exact
    ids = pair.encode_prompt(llm.prompts("humaneval", 1, seed=5)[0], chat=False)[:24]
    kw = dict(L=3, B=B, key=5, max_new_tokens=10, seed=3)
    log = DistributionLog.for_pair(pair, tmp_path / "log", decoder=decoder, key=5,
                                   value_dtype="float64")
    res = gen.generate(pair, ids, decoder, log=log, chat=False, stop_at_eos=False, **kw)
    log.close()
    replayed = read_log(tmp_path / "log")
    assert replayed.meta["decoder"] == decoder and replayed.meta["key_id"] is not None
    target, draft = replayed.replay(str(pair.draft_spec))
    sim_res = speculative_decode(target, draft, ids, decoder, window=gen.DEFAULT_WINDOW, **kw)
    np.testing.assert_array_equal(sim_res.tokens, res.tokens)
