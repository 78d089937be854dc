"""Keyed randomness on torch (specbound.llm.keyed) against the NumPy/Numba PRF.

The torch expansion must give bit-for-bit the uniforms of ``specbound.sim.prf`` for the same
key, context window, token ids and arrival indices (compared as int64 bit patterns, so no
tolerance is involved).  Deterministic: no statistical test, no false-failure probability.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specbound import sim  # noqa: E402
from specbound.llm import context_labels, keyed_uniforms, prf_uniform_torch  # noqa: E402
from specbound.sim.prf import context_label, prf_uniform_numpy  # noqa: E402

VOCAB = 49152  # the embedded model's vocabulary
EDGE_TOKENS = [0, 1, 2**31 - 2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40 + 7, 2**62]


def _bits(x) -> np.ndarray:
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    assert x.dtype == np.float64
    return x.view(np.int64)


def _reference(key, context, tokens, arrivals, window):
    label = context_label(key, np.asarray(context, dtype=np.int64), window)
    tok = np.asarray(tokens, dtype=np.int64)
    return prf_uniform_numpy(label, tok[:, None], np.arange(arrivals)[None, :])


keys = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=12), st.binary(max_size=12))
contexts = st.lists(st.integers(0, 2**31 - 1), max_size=12)
windows = st.one_of(st.none(), st.integers(0, 14))
token_lists = st.lists(st.one_of(st.integers(0, 2**31 + 10), st.sampled_from(EDGE_TOKENS)),
                       min_size=1, max_size=40)


@given(key=keys, context=contexts, window=windows, tokens=token_lists,
       arrivals=st.integers(1, 6))
def test_torch_uniforms_equal_numpy_bit_for_bit(key, context, window, tokens, arrivals):
    got = keyed_uniforms(key, context, tokens, arrivals, window=window)
    assert got.dtype == torch.float64 and got.shape == (len(tokens), arrivals)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(key, context, tokens,
                                                               arrivals, window)))


@pytest.mark.parametrize("key", [0, 42, 2**63 + 5, -3, "secret", b"\x00\xff"])
@pytest.mark.parametrize("window", [None, 0, 1, 4])
def test_full_vocabulary_equals_numba_keyed_uniforms(key, window):
    rng = np.random.default_rng(7)
    context = rng.integers(0, VOCAB, size=9)
    vocab = torch.arange(VOCAB)
    got = keyed_uniforms(key, context, vocab, 3, window=window)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(key, context, np.arange(VOCAB),
                                                               3, window)))
    if window is None:  # the simulator's public function (window = whole prefix)
        np.testing.assert_array_equal(_bits(got),
                                      _bits(sim.keyed_uniforms(key, context, np.arange(VOCAB),
                                                               3)))


def test_many_arrivals_and_edge_token_ids():
    got = keyed_uniforms(11, [5, 6, 7], EDGE_TOKENS, 64, window=2)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(11, [5, 6, 7], EDGE_TOKENS, 64,
                                                               2)))
    assert float(got.min()) > 0.0 and float(got.max()) < 1.0


def test_prf_uniform_torch_broadcasts_like_numpy():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2**63, size=5, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    tokens = rng.integers(0, 2**40, size=(1, 7, 1))
    arrivals = np.arange(4)[None, None, :]
    got = prf_uniform_torch(torch.as_tensor(labels.view(np.int64))[:, None, None],
                            torch.as_tensor(tokens), torch.as_tensor(arrivals))
    want = prf_uniform_numpy(labels[:, None, None], tokens, arrivals)
    assert got.shape == want.shape == (5, 7, 4)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    # scalar uint64 label above 2**63 and plain Python ints
    big = np.uint64(2**64 - 12345)
    np.testing.assert_array_equal(_bits(prf_uniform_torch(big, [0, 9], 2)),
                                  _bits(prf_uniform_numpy(big, [0, 9], 2)))
    np.testing.assert_array_equal(_bits(prf_uniform_torch(int(big), 3, [0, 1])),
                                  _bits(prf_uniform_numpy(big, 3, [0, 1])))


def test_context_labels_batch_matches_per_context_labels():
    ctxs = [[1, 2, 3], [], [7] * 10, torch.tensor([4, 5])]
    labels = context_labels("k", ctxs, window=2)
    assert labels.dtype == torch.int64 and labels.shape == (4,)
    want = np.array([context_label("k", np.asarray(c, dtype=np.int64), 2) for c in
                     [[1, 2, 3], [], [7] * 10, [4, 5]]], dtype=np.uint64)
    np.testing.assert_array_equal(labels.numpy(), want.view(np.int64))
    vocab = torch.arange(50)
    got = prf_uniform_torch(labels[:, None], vocab[None, :], 0)
    for i, c in enumerate([[1, 2, 3], [], [7] * 10, [4, 5]]):
        np.testing.assert_array_equal(_bits(got[i]), _bits(_reference("k", c, range(50), 1,
                                                                      2)[:, 0]))


@pytest.mark.parametrize("kwargs, name", [
    ({"arrivals": 0}, "arrivals"),
    ({"arrivals": 1.5}, "arrivals"),
    ({"tokens": [-1, 2]}, "tokens"),
    ({"tokens": [[1, 2]]}, "tokens"),
    ({"tokens": [0.5]}, "tokens"),
    ({"tokens": torch.tensor([1.0])}, "tokens"),
    ({"window": -1}, "window"),
    ({"window": 1.5}, "window"),
    ({"context": [0.5, 1.0]}, "context"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = {"key": 1, "context": [1, 2], "tokens": [0, 1], "arrivals": 1, "window": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"^{name}"):
        keyed_uniforms(args.pop("key"), args.pop("context"), args.pop("tokens"),
                       args.pop("arrivals"), **args)


@pytest.mark.gpu
def test_cuda_uniforms_equal_numpy_bit_for_bit():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(11)
    for trial in range(20):
        key = int(rng.integers(0, 2**62))
        context = rng.integers(0, 2**31, size=int(rng.integers(0, 30)))
        window = None if trial % 3 == 0 else int(rng.integers(0, 10))
        tokens = np.concatenate([np.arange(VOCAB), EDGE_TOKENS])
        got = keyed_uniforms(key, context, torch.as_tensor(tokens, device="cuda"), 4,
                             window=window)
        assert got.device.type == "cuda"
        np.testing.assert_array_equal(_bits(got), _bits(_reference(key, context, tokens, 4,
                                                                   window)))
