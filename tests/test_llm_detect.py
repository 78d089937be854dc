"""specbound.llm.detect: watermark detection from text or token ids with the key alone.

One watermarked generation of 100 tokens (``basic_uwm`` on the embedded model, module
fixture) is detected with the right key (tiny p-value, from the result, from its token ids
and from its re-tokenized text) and with 400 wrong keys (p-values uniform: KS test).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound.llm import detection as D  # noqa: E402
from specbound.llm.generation import DEFAULT_WINDOW, generate  # noqa: E402
from tests._stats import FIVE_SIGMA_RATE  # noqa: E402

KEY = 42
N_TOKENS = 100


@pytest.fixture(scope="module")
def marked(llm_pair):
    return generate(llm_pair, "Tell me a short story about a fox.", "basic_uwm", key=KEY,
                    max_new_tokens=N_TOKENS, stop_at_eos=False, seed=0)


def test_right_key_gives_a_tiny_pvalue(marked, llm_pair):
    assert marked.n_generated == N_TOKENS and marked.watermark.window == DEFAULT_WINDOW
    from_result = D.detect(marked, KEY)
    assert from_result.n_scored >= 60
    assert from_result.log_pvalue < np.log(1e-6)
    from_ids = D.detect(marked.generated, KEY)  # the first `window` tokens are not scored
    assert from_ids.n_scored <= from_result.n_scored
    assert from_ids.log_pvalue < np.log(1e-6)
    from_text = D.detect(marked.text, KEY, tokenizer=llm_pair)
    assert from_text.log_pvalue < np.log(1e-4)
    # the default tokenizer is the embedded model's, loaded without its weights
    assert D.detect(marked.text, KEY).log_pvalue == from_text.log_pvalue


def test_wrong_keys_give_uniform_pvalues(marked):
    """H0: for a key unrelated to the text the pivots are i.i.d. U(0, 1) (each context window
    and token scored once), so the exact p-values are uniform over keys.  A KS test at
    FIVE_SIGMA_RATE (about 5.7e-7) fails wrongly with that probability."""
    pv = np.array([np.exp(D.detect(marked.generated, 10_000 + k).log_pvalue)
                   for k in range(400)])
    assert stats.kstest(pv, "uniform").pvalue >= FIVE_SIGMA_RATE


def test_bad_input(marked):
    with pytest.raises(ValueError, match="^window:"):
        D.detect(marked, KEY, window=2)
    with pytest.raises(ValueError, match="^window:"):
        D.detect([1, 2, 3], KEY, window=-1)
    with pytest.raises(ValueError, match="^key:"):
        D.detect([1, 2, 3, 4, 5, 6], None)
    with pytest.raises(ValueError, match="^tokenizer:"):
        D.detect("some text", KEY, tokenizer=3)


def test_tokenizer_for_resolves_each_kind_of_argument():
    # no model loaded: a tokenizer object is returned as is, a ModelPair gives its tokenizer
    from specbound import sim
    from tests._llm_synth import synthetic_pair, tiny_tokenizer

    tok = tiny_tokenizer()
    assert D.tokenizer_for(tok) is tok
    lm = sim.SyntheticLM(12, seed=1)
    pair = synthetic_pair(lm, lm.draft(0.5), tokenizer=tok)
    assert D.tokenizer_for(pair) is pair.tokenizer
    for bad in (3, 2.5, b"embedded"):
        with pytest.raises(ValueError, match="^tokenizer: must be"):
            D.tokenizer_for(bad)
