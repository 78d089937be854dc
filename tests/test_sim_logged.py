"""Tests of the logged (p, q) format (specbound.sim.logged) with synthetic data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specbound._validation import as_prob
from specbound.sim.distributions import dirichlet, noisy_draft, zipf
from specbound.sim.logged import ARRAY_NAMES, DenseBatch, LogReader, LogWriter, SparseBatch

V = 40
META = {"vocab_size": V, "target_model": "toy-target", "draft_model": "toy-draft",
        "processing": {"temperature": 1.0, "top_k": None}, "prompts": {"0": "a", "7": "b"}}


def _pairs(n_pos, seed=0):
    """Full (p, q) pairs on V tokens with zeros and a controlled mismatch."""
    P = dirichlet(V, 0.3, size=n_pos, seed=seed)
    P[:, :3] = 0.0
    P /= P.sum(axis=1, keepdims=True)
    Q = noisy_draft(P, 0.3, seed=seed + 1).q
    Q = 0.8 * Q + 0.2 * zipf(V, 1.0, size=n_pos, seed=seed + 2)
    return P, Q


def _topk(p, k):
    idx = np.argsort(-p, kind="stable")[:k]
    return idx, p[idx]


def _write(path, P, Q, kp, kq, *, prompt_of=None, chunk_size=64, value_dtype="float32",
           close=True, resume=False, start=0):
    w = LogWriter(path, META, chunk_size=chunk_size, value_dtype=value_dtype, resume=resume)
    for i in range(start, P.shape[0]):
        pi, pv = _topk(P[i], kp)
        qi, qv = _topk(Q[i], kq)
        pid = 0 if prompt_of is None else prompt_of[i]
        w.append(pid, pi, pv, qi, qv, p_tail=1.0 - pv.sum(), q_tail=1.0 - qv.sum())
    if close:
        w.close()
    return w


def _tv(p, q):
    return 0.5 * np.abs(p - q).sum(axis=-1)


# ------------------------------------------------------------------- round trip


def test_round_trip_sparse_exact(tmp_path):
    P, Q = _pairs(23)
    prompt_of = np.array([0] * 10 + [7] * 13)
    _write(tmp_path / "log", P, Q, 5, 8, prompt_of=prompt_of, value_dtype="float64")
    r = LogReader(tmp_path / "log")
    assert len(r) == 23 and r.complete and r.meta == META and r.vocab_size == V
    np.testing.assert_array_equal(r.prompt_id, prompt_of)
    np.testing.assert_array_equal(r.step, list(range(10)) + list(range(13)))
    got = list(r.batches(6, dense=False))
    assert [b.start for b in got] == [0, 6, 12, 18] and all(isinstance(b, SparseBatch)
                                                            for b in got)
    for b in got:
        for j in range(b.prompt_id.shape[0]):
            i = b.start + j
            pi, pv = _topk(P[i], 5)
            qi, qv = _topk(Q[i], 8)
            sl = slice(b.p_offsets[j], b.p_offsets[j + 1])
            np.testing.assert_array_equal(b.p_idx[sl], pi)
            np.testing.assert_array_equal(b.p_val[sl], pv)  # float64 storage: bit-exact
            assert b.p_tail[j] == 1.0 - pv.sum()
            sl = slice(b.q_offsets[j], b.q_offsets[j + 1])
            np.testing.assert_array_equal(b.q_idx[sl], qi)
            np.testing.assert_array_equal(b.q_val[sl], qv)


def test_full_logs_densify_exactly_in_every_mode(tmp_path):
    # k = V: no tail, so every tail mode reproduces p and q
    P, Q = _pairs(9, seed=3)
    _write(tmp_path / "log", P, Q, V, V, value_dtype="float64")
    r = LogReader(tmp_path / "log")
    for tail in ("other", "spread", "drop"):
        (b,) = list(r.batches(100, tail=tail))
        assert isinstance(b, DenseBatch) and b.tail == tail
        width = V + 1 if tail == "other" else V
        assert b.p.shape == (9, width)
        np.testing.assert_allclose(b.p[:, :V], P, rtol=1e-14, atol=1e-16)
        np.testing.assert_allclose(b.q[:, :V], Q, rtol=1e-14, atol=1e-16)
        if tail == "other":
            np.testing.assert_allclose(b.p[:, V], 0.0, atol=1e-14)
    lo, hi = next(r.batches(100)).tv_bounds()
    np.testing.assert_allclose(lo, _tv(P, Q), atol=1e-14)
    np.testing.assert_allclose(hi, _tv(P, Q), atol=1e-14)


@pytest.mark.parametrize(("kp", "kq"), [(1, 1), (3, 7), (10, 10), (25, 4)])
def test_dense_modes_are_honest(tmp_path, kp, kq):
    P, Q = _pairs(30, seed=kp)
    _write(tmp_path / "log", P, Q, kp, kq)
    r = LogReader(tmp_path / "log")
    other = next(r.batches(30, tail="other"))
    spread = next(r.batches(30, tail="spread"))
    drop = next(r.batches(30, tail="drop"))
    for b in (other, spread, drop):
        as_prob(b.p, "p")  # rows are probability vectors within 1e-9
        as_prob(b.q, "q")
    # "other": a common coarsening -> the true TV lies in the stated bracket
    lo, hi = other.tv_bounds()
    tv = _tv(P, Q)
    assert np.all(lo <= tv + 1e-6) and np.all(tv <= hi + 1e-6)
    # "spread": |TV_spread - TV| <= p_tail + q_tail
    pt = np.array([1 - _topk(p, kp)[1].sum() for p in P])
    qt = np.array([1 - _topk(q, kq)[1].sum() for q in Q])
    assert np.all(np.abs(_tv(spread.p, spread.q) - tv) <= pt + qt + 1e-6)
    # "drop": each model's top-k renormalised; TV(p_drop, p) = p_tail
    np.testing.assert_allclose(_tv(drop.p, P), pt, atol=1e-6)
    for i in range(30):
        pi, pv = _topk(P[i], kp)
        np.testing.assert_allclose(drop.p[i, pi], pv / pv.sum(), rtol=1e-6)


def test_dense_matches_sparse(tmp_path):
    P, Q = _pairs(17, seed=5)
    _write(tmp_path / "log", P, Q, 6, 9)
    r = LogReader(tmp_path / "log")
    dense = list(r.batches(5, tail="drop"))
    sparse = list(r.batches(5, dense=False))
    assert [d.start for d in dense] == [s.start for s in sparse] == [0, 5, 10, 15]
    for d, s in zip(dense, sparse, strict=True):
        np.testing.assert_array_equal(d.prompt_id, s.prompt_id)
        for j in range(d.p.shape[0]):
            sl = slice(s.p_offsets[j], s.p_offsets[j + 1])
            vals = np.asarray(s.p_val[sl], dtype=np.float64)
            np.testing.assert_allclose(d.p[j, s.p_idx[sl]], vals / vals.sum(), rtol=1e-15)
            assert np.count_nonzero(d.p[j]) == sl.stop - sl.start
            sl = slice(s.q_offsets[j], s.q_offsets[j + 1])
            ref = np.zeros(V)
            ref[s.q_idx[sl]] = s.q_val[sl]
            ref += np.where(ref > 0, 0.0, s.q_tail[j] / (V - 9))
            spread = r.dense(s.start + j, s.start + j + 1, tail="spread")
            np.testing.assert_allclose(spread.q[0], ref / ref.sum(), rtol=1e-12)


def test_memory_mapped(tmp_path):
    P, Q = _pairs(8)
    _write(tmp_path / "log", P, Q, 4, 4)
    r = LogReader(tmp_path / "log")
    arrs = r.arrays()
    for name, a in arrs.items():
        assert isinstance(a, np.memmap), name
        assert not a.flags.writeable
        # each file is a standard .npy readable by numpy itself
        direct = np.load(tmp_path / "log" / f"{name}.npy", mmap_mode="r")
        np.testing.assert_array_equal(direct[: a.shape[0]], a)
    b = next(r.batches(8, dense=False))
    assert isinstance(b.p_idx, np.memmap)  # slices stay views of the mapped file


def test_variable_k_and_batched_append(tmp_path):
    with LogWriter(tmp_path / "log", META) as w:
        w.append(7, [[1, 2], [3, 4]], [[0.5, 0.5], [0.9, 0.1]], [[1], [3]], [[1.0], [0.95]],
                 q_tail=[0.0, 0.05])
        w.append(7, [5, 6, 7], [0.2, 0.2, 0.1], [5], [0.5])
        assert w.n_positions == 3 and w.prompt_ids == {7}
    r = LogReader(tmp_path / "log")
    np.testing.assert_array_equal(r.step, [0, 1, 2])
    s = r.sparse(0, 3)
    np.testing.assert_array_equal(s.p_offsets, [0, 2, 4, 7])
    np.testing.assert_allclose(s.p_tail, [0.0, 0.0, 0.5])
    np.testing.assert_allclose(s.q_tail, [0.0, 0.05, 0.5])
    assert len(LogReader(tmp_path / "log")) == 3


def test_empty_log(tmp_path):
    LogWriter(tmp_path / "log", META).close()
    r = LogReader(tmp_path / "log")
    assert len(r) == 0 and list(r.batches(4)) == [] and r.complete


# ------------------------------------------------------------------- resume


def _all_arrays(path):
    r = LogReader(path)
    return {k: np.array(v) for k, v in r.arrays().items()}


def test_resume_after_interrupted_writer(tmp_path):
    P, Q = _pairs(23, seed=8)
    prompt_of = np.repeat(np.arange(23) // 6, 1)
    _write(tmp_path / "ref", P, Q, 5, 6, prompt_of=prompt_of, chunk_size=4)
    # interrupted run: 14 positions appended, chunk 4 -> 12 committed, 2 lost; never closed
    w = _write(tmp_path / "log", P[:14], Q[:14], 5, 6, prompt_of=prompt_of, chunk_size=4,
               close=False)
    del w
    r = LogReader(tmp_path / "log")
    assert len(r) == 12 and not r.complete
    # a partially written chunk: garbage after the committed data of two files
    with open(tmp_path / "log" / "p_idx.npy", "ab") as fh:
        fh.write(b"\x07" * 13)
    with open(tmp_path / "log" / "q_tail.npy", "ab") as fh:
        fh.write(b"\xff" * 24)
    assert len(LogReader(tmp_path / "log")) == 12
    w = LogWriter(tmp_path / "log", META, chunk_size=4, resume=True)
    assert w.n_positions == 12 and w.prompt_ids == {0, 1}
    del w
    _write(tmp_path / "log", P, Q, 5, 6, prompt_of=prompt_of, chunk_size=4, resume=True,
           start=12)
    got, ref = _all_arrays(tmp_path / "log"), _all_arrays(tmp_path / "ref")
    assert got.keys() == ref.keys()
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    assert LogReader(tmp_path / "log").complete


def test_reader_ignores_header_written_past_commit(tmp_path):
    # interrupted between rewriting a header and committing meta.json (a writer that is
    # not closed: meta.json says complete = false)
    P, Q = _pairs(6)
    _write(tmp_path / "log", P, Q, 3, 3)
    (tmp_path / "log" / "SHA256SUMS").unlink()  # written at close only
    _edit_meta(tmp_path / "log", lambda d: d.update(complete=False))
    f = tmp_path / "log" / "p_val.npy"
    a = np.load(f)
    np.save(f, np.concatenate([a, np.ones(5, a.dtype)]))  # longer array, same dtype
    r = LogReader(tmp_path / "log")
    assert len(r) == 6 and r.arrays()["p_val"].shape == a.shape
    np.testing.assert_array_equal(r.arrays()["p_val"], a)
    # a closed writer leaves every file at its committed length: in a complete log, entries
    # beyond the commit mean a meta.json whose counts were lowered (a short read)
    _edit_meta(tmp_path / "log", lambda d: d.update(complete=True))
    for validate in (True, False):
        with pytest.raises(ValueError, match=r"p_val.npy holds \d+ entries but the complete "
                                             "log's .*meta.json commits"):
            LogReader(tmp_path / "log", validate=validate)


def test_writer_refuses_to_overwrite_and_checks_meta_on_resume(tmp_path):
    LogWriter(tmp_path / "log", META).close()
    with pytest.raises(ValueError, match="path: .*already holds a log"):
        LogWriter(tmp_path / "log", META)
    with pytest.raises(ValueError, match="meta: differs"):
        LogWriter(tmp_path / "log", {**META, "draft_model": "other"}, resume=True)
    with pytest.raises(ValueError, match="path: .*no log to resume"):
        LogWriter(tmp_path / "new", META, resume=True)


# ------------------------------------------------------------------- corrupted files


def _make(tmp_path):
    P, Q = _pairs(7)
    _write(tmp_path / "log", P, Q, 3, 4)
    return tmp_path / "log"


def _edit_array(path, name, fn):
    a = np.load(path / f"{name}.npy")
    a = fn(a.copy())
    np.save(path / f"{name}.npy", a)


def _edit_meta(path, fn):
    doc = json.loads((path / "meta.json").read_text())
    fn(doc)
    (path / "meta.json").write_text(json.dumps(doc))


def _set(a, i, v):
    a[i] = v
    return a


@pytest.mark.parametrize(
    ("corrupt", "match"),
    [
        (lambda p: (p / "q_val.npy").unlink(), "missing array file q_val.npy"),
        (lambda p: (p / "meta.json").unlink(), "is not a log"),
        (lambda p: (p / "meta.json").write_text("{oops"), "not valid JSON"),
        (lambda p: _edit_meta(p, lambda d: d.update(format="other")), "is not a specbound"),
        (lambda p: _edit_meta(p, lambda d: d.update(version=2)), "unsupported format version"),
        (lambda p: _edit_meta(p, lambda d: d.pop("committed")), "lacks a required field"),
        (lambda p: _edit_meta(p, lambda d: d["committed"].update(positions=8)),
         "truncated file"),
        (lambda p: _edit_meta(p, lambda d: d.update(value_dtype="float16")), "value_dtype"),
        (lambda p: _edit_meta(p, lambda d: d["meta"].pop("vocab_size")), "vocab_size"),
        (lambda p: (p / "p_idx.npy").write_bytes(b"not an npy file"), "p_idx.npy is corrupted"),
        (lambda p: _edit_array(p, "p_idx", lambda a: a.astype(np.int64)),
         "p_idx.npy has dtype int64"),
        (lambda p: _edit_array(p, "p_offsets", lambda a: _set(a, 2, a[1])),
         "p_offsets.npy is inconsistent"),
        (lambda p: _edit_array(p, "q_offsets", lambda a: _set(a, 0, 1)),
         "q_offsets.npy is inconsistent"),
        (lambda p: _edit_array(p, "q_idx", lambda a: _set(a, 3, V)),
         "q_idx.npy has token ids outside"),
        (lambda p: _edit_array(p, "p_val", lambda a: _set(a, 0, np.nan)),
         "p_val.npy has entries"),
        (lambda p: _edit_array(p, "q_tail", lambda a: _set(a, 0, 2.0)),
         "q_tail.npy has entries"),
        (lambda p: _edit_array(p, "p_tail", lambda a: _set(a, 1, a[1] + 0.1)),
         "p_val.npy \\+ p_tail.npy rows do not sum to 1"),
        (lambda p: _edit_array(p, "prompt_id", lambda a: _set(a, 1, -3)),
         "negative prompt ids"),
        (lambda p: _edit_array(p, "step", lambda a: a[:3]), "step.npy holds 3 entries"),
    ],
)
def test_corrupted_logs_raise(tmp_path, corrupt, match):
    path = _make(tmp_path)
    corrupt(path)
    with pytest.raises(ValueError, match=match):
        LogReader(path)


def test_deeply_nested_meta_json_is_a_value_error(tmp_path):
    path = _make(tmp_path)
    (path / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="not valid JSON"):
        LogReader(path)


def test_validate_false_skips_content_checks(tmp_path):
    path = _make(tmp_path)
    _edit_array(path, "q_idx", lambda a: _set(a, 3, V))
    assert len(LogReader(path, validate=False)) == 7


# ------------------------------------------------------------------- writer validation


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, [1, 2], [0.5, 0.5], [V], [1.0]), {}, "q_idx: token ids must lie"),
        ((0, [1, -2], [0.5, 0.5], [1], [1.0]), {}, "p_idx: token ids must lie"),
        ((0, [1, 1], [0.5, 0.5], [1], [1.0]), {}, "p_idx: token ids must be unique"),
        ((0, [1.0, 2.0], [0.5, 0.5], [1], [1.0]), {}, "p_idx: must contain integer"),
        ((0, [1, 2], [0.5, 0.5, 0.0], [1], [1.0]), {}, "p_val: shape"),
        ((0, [1, 2], [0.5, -0.5], [1], [1.0]), {}, "p_val: probabilities must be"),
        ((0, [1, 2], [0.0, 0.0], [1], [1.0]), {}, "p_val: the stored probabilities"),
        ((0, [1, 2], [0.5, 0.4], [1], [1.0]), {"p_tail": 0.3}, "p_val: stored probabilities "
                                                               "plus tail"),
        ((0, [1, 2], [0.5, 0.4], [1], [1.0]), {"p_tail": [0.1, 0.0]}, "p_tail: must have"),
        ((0, [1, 2], [0.5, 0.4], [1], [0.5]), {"q_tail": -0.5}, "q_tail: must be finite"),
        ((0, [[1], [2]], [[1.0], [1.0]], [1], [1.0]), {}, "q_idx: 1 positions but p_idx"),
        ((0, [[[1]]], [[[1.0]]], [1], [1.0]), {}, "p_idx: must have shape"),
        ((0, np.zeros((2, 0), int), np.zeros((2, 0)), [1], [1.0]), {}, "p_idx: must have"),
        ((-1, [1], [1.0], [1], [1.0]), {}, "prompt_id"),
        ((True, [1], [1.0], [1], [1.0]), {}, "prompt_id"),
        ((0, [1], [1.0], [1], ["x"]), {}, "q_val: must contain real"),
    ],
)
def test_append_validation(tmp_path, args, kwargs, match):
    with LogWriter(tmp_path / "log", META) as w, pytest.raises(ValueError, match=match):
        w.append(*args, **kwargs)
    assert len(LogReader(tmp_path / "log")) == 0  # nothing invalid was written


def test_writer_and_reader_option_validation(tmp_path):
    with pytest.raises(ValueError, match="meta: must contain 'vocab_size'"):
        LogWriter(tmp_path / "a", {"target_model": "x"})
    with pytest.raises(ValueError, match="meta: must be a dict"):
        LogWriter(tmp_path / "a", [("vocab_size", 3)])
    with pytest.raises(ValueError, match="meta: must be JSON-serialisable"):
        LogWriter(tmp_path / "a", {"vocab_size": 3, "x": object()})
    with pytest.raises(ValueError, match=r"meta\['vocab_size'\]"):
        LogWriter(tmp_path / "a", {"vocab_size": 0})
    with pytest.raises(ValueError, match="chunk_size"):
        LogWriter(tmp_path / "a", META, chunk_size=0)
    with pytest.raises(ValueError, match="value_dtype"):
        LogWriter(tmp_path / "a", META, value_dtype="float16")
    w = LogWriter(tmp_path / "b", META)
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="append: the writer is closed"):
        w.append(0, [1], [1.0], [1], [1.0])
    r = LogReader(tmp_path / "b")
    with pytest.raises(ValueError, match="batch_size"):
        list(r.batches(0))
    with pytest.raises(ValueError, match="tail"):
        list(r.batches(2, tail="uniform"))
    with pytest.raises(ValueError, match="dense"):
        list(r.batches(2, dense="yes"))
    with pytest.raises(ValueError, match="path: .* is not a log"):
        LogReader(tmp_path / "nothing")
    P, Q = _pairs(3)
    _write(tmp_path / "c", P, Q, 2, 2)
    with pytest.raises(ValueError, match="tail: tv_bounds needs tail='other'"):
        next(LogReader(tmp_path / "c").batches(3, tail="drop")).tv_bounds()


# ------------------------------------------------------------------- hardening


def test_bad_slice_bounds_name_the_argument(tmp_path):
    # regression: these raised IndexError or TypeError
    r = LogReader(_make(tmp_path))
    for start, stop, match in ((0, 8, "stop"), (-1, 3, "start"), (5, 2, "stop"),
                               (8, 9, "start"), ("0", 3, "start"), (0, 2.5, "stop"),
                               (0, None, "stop")):
        for fn in (r.sparse, r.dense):
            with pytest.raises(ValueError, match=match):
                fn(start, stop)
    # valid bounds, including the empty slice at the end, still work
    assert r.dense(7, 7).p.shape == (0, V + 1)
    assert r.sparse(2, 5).prompt_id.shape == (3,)
    with pytest.raises(ValueError, match="validate: must be True or False"):
        LogReader(tmp_path / "log", validate="no")
    with pytest.raises(ValueError, match="dense: must be True or False"):
        next(r.batches(2, dense=1))


def test_validate_catches_a_token_repeated_within_a_position(tmp_path):
    # regression: validate=True accepted it, and dense() then silently dropped mass
    path = _make(tmp_path)
    off = np.load(path / "p_offsets.npy")
    assert off[1] - off[0] >= 2  # position 0 stores at least two tokens

    def dup(a):
        a[off[0] + 1] = a[off[0]]
        return a

    _edit_array(path, "p_idx", dup)
    with pytest.raises(ValueError, match="p_idx.npy repeats token .* within position 0"):
        LogReader(path)
    # the same token in two different positions is fine
    path2 = _make(tmp_path / "b")
    assert len(LogReader(path2)) == 7


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d["committed"].update(positions="seven"), "committed\\['positions'\\]"),
        (lambda d: d["committed"].update(p_nnz=-3), "committed\\['p_nnz'\\]"),
        (lambda d: d.update(committed=[1, 2, 3]), "malformed field"),
        (lambda d: d["meta"].update(vocab_size="40"), "vocab_size"),
        (lambda d: d.update(complete="no"), "'complete' must be true or false"),
        (lambda d: d["committed"].update(positions=3), "the complete log's .*meta.json commits"),
    ],
)
def test_malformed_meta_fields_name_the_file(tmp_path, edit, match):
    # regression: e.g. a non-numeric committed count gave a bare "invalid literal for int()"
    path = _make(tmp_path)
    _edit_meta(path, edit)
    with pytest.raises(ValueError, match=match) as info:
        LogReader(path)
    assert str(path / "meta.json") in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p_val": ["0.5", "0.5"]}, "p_val: must contain real numbers"),
        ({"q_val": np.array([1.0 + 0j])}, "q_val: must contain real numbers"),
        ({"p_tail": "0.0"}, "p_tail"),
        ({"q_idx": ["1"]}, "q_idx: must contain integer"),
    ],
)
def test_append_refuses_strings_and_complex(tmp_path, kwargs, match):
    # regression: probabilities given as strings were parsed as numbers
    args = {"prompt_id": 0, "p_idx": [1, 2], "p_val": [0.5, 0.5], "q_idx": [1], "q_val": [1.0]}
    args.update(kwargs)
    with LogWriter(tmp_path / "log", META) as w, pytest.raises(ValueError, match=match):
        w.append(**args)
    assert len(LogReader(tmp_path / "log")) == 0
    with pytest.raises(ValueError, match="resume: must be True or False"):
        LogWriter(tmp_path / "other", META, resume="yes")


def test_checksums_are_written_at_close_and_checked_by_default(tmp_path):
    """A closed log carries SHA256SUMS; a token id edited into another valid one (which no
    structural check can see) is caught on reading and refused on resuming; resuming an
    intact log removes the checksums until the next close."""
    from specbound._io import SUMS, WRITER_MARK, read_sums

    P, Q = _pairs(6)
    path = tmp_path / "log"
    _write(path, P, Q, 3, 3)
    assert (path / SUMS).read_text().splitlines()[0] == WRITER_MARK
    assert set(read_sums(path)) == {"meta.json"} | {f"{n}.npy" for n in ARRAY_NAMES}
    ref = LogReader(path).arrays()["p_idx"].copy()
    # resuming an intact closed log: checked, removed, written again at close
    w = LogWriter(path, META, resume=True)
    assert not (path / SUMS).exists()
    w.close()
    assert (path / SUMS).exists() and len(LogReader(path, checksums=True)) == 6

    def swap(a):
        a[0], a[1] = a[1], a[0]  # two stored tokens of position 0 exchanged: still valid
        return a

    _edit_array(path, "p_idx", swap)
    assert not np.array_equal(LogReader(path, checksums=False).arrays()["p_idx"], ref)
    with pytest.raises(ValueError, match=r"^path: p_idx.npy in .* does not match its SHA-256"):
        LogReader(path)
    with pytest.raises(ValueError, match=r"^path: p_idx.npy in .* does not match its SHA-256"):
        LogWriter(path, META, resume=True)
    LogReader(path, validate=False)  # no content checks at all
    (path / SUMS).unlink()
    LogReader(path)  # an older log without checksums still reads
    with pytest.raises(ValueError, match="has no SHA256SUMS"):
        LogReader(path, checksums=True)
    with pytest.raises(ValueError, match="checksums: must be True or False"):
        LogWriter(tmp_path / "other", META, checksums="yes")
