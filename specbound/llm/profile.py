r"""How well each draft matches the target on real text: 1 - TV and exact acceptance.

For a prompt set and one or more drafts, :func:`acceptance_profile` applies the theory's
formulas to the real processed distributions :math:`(p, q)` of the pair:

* ``one_minus_tv`` -- :math:`1 - \mathrm{TV}(p, q)`, the acceptance of standard speculative
  sampling (Leviathan et al. 2023; Chen et al. 2023), via
  :func:`specbound.theory.tv_distance`;
* ``mpfr_B{b}`` -- the exact acceptance of MPFR with ``b`` drafts, Liu, Wan, Gao & Gündüz
  (2026, arXiv:2609.21858), Alg. 6 / Thm B.1 (``b = 1``: the exponential race / PFR of
  Alg. 2-3), via :func:`specbound.theory.exact_acceptance`;
* ``gls_B{b}`` (``b >= 2``) -- the exact acceptance of GLS / list coupling with ``b`` drafts
  (Rowan et al. 2025), same function (for ``b = 1`` it equals ``mpfr_B1``).

Contexts: every prefix of each tokenized prompt -- the target's and the draft's next-token
distributions at each position of the prompt, teacher-forced on the prompt's own tokens
(one forward pass per prompt and model gives all of them).  They measure how close the
draft is to the target on real text; contexts made of the model's own samples come with the
generation logs of a later step.  ``max_tokens`` truncates each prompt, ``max_contexts``
keeps evenly spaced positions (first and last included) to bound the cost of GLS, whose
exact value costs about 0.5 s per context at a full 49k vocabulary (zeros of top-k/top-p
processing are dropped first, so it is cheap with ``top_k``).

Means are over all contexts; their standard errors are cluster-robust over prompts
(contexts of one prompt are correlated), for ``N`` contexts in ``G`` prompts (NaN for one
prompt):

.. math:: \widehat{\mathrm{se}}^2 = \frac{G}{G-1}
          \sum_g \Bigl(\sum_{i \in g} (x_i - \bar x)\Bigr)^2 / N^2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbound._validation import as_bool, as_choice, as_int
from specbound.llm._deps import require_llm_extra
from specbound.llm.prompt_sets import TEMPLATES, check_text
from specbound.theory import exact_acceptance, tv_distance

require_llm_extra()

__all__ = ["AcceptanceProfile", "acceptance_profile"]

PROFILE_SCHEMES = ("mpfr", "gls")


@dataclass(frozen=True, eq=False)
class AcceptanceProfile:
    """Result of :func:`acceptance_profile`.

    Attributes
    ----------
    contexts : pandas.DataFrame
        One row per (draft, prompt, position): ``draft`` (spec text), ``prompt`` (index in
        the prompt list), ``position`` (0-based; the context is the first ``position + 1``
        tokens), then the metric columns ``one_minus_tv``, ``mpfr_B{b}``, ``gls_B{b}``.
    summary : pandas.DataFrame
        One row per draft: ``draft``, ``n_prompts``, ``n_contexts``, and for each metric
        its mean (column named after the metric) and ``{metric}_stderr``.
    """

    contexts: pd.DataFrame
    summary: pd.DataFrame

    @property
    def metrics(self) -> list[str]:
        """Names of the metric columns."""
        return [c for c in self.contexts.columns if c not in ("draft", "prompt", "position")]

    def to_frame(self) -> pd.DataFrame:
        """The per-draft summary."""
        return self.summary


def _cluster_stderr(x: np.ndarray, groups: np.ndarray) -> float:
    labels = np.unique(groups)
    g = len(labels)
    if g < 2:
        return float("nan")
    dev = x - x.mean()
    sums = np.array([dev[groups == lab].sum() for lab in labels])
    return float(np.sqrt(g / (g - 1) * np.sum(sums**2)) / len(x))


def _as_B_list(B) -> list[int]:
    if isinstance(B, Sequence | np.ndarray) and not isinstance(B, str | bytes):
        values = list(np.asarray(B, dtype=object).reshape(-1))
    else:
        values = [B]
    if not values:
        raise ValueError("B: must name at least one number of drafts")
    return sorted({as_int(b, "B", min_value=1) for b in values})


def _positions(n: int, max_contexts: int | None) -> np.ndarray:
    if max_contexts is None or max_contexts >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max_contexts)).astype(np.int64))


def _metrics(p: np.ndarray, q: np.ndarray, Bs, schemes) -> dict[str, np.ndarray]:
    out = {"one_minus_tv": 1.0 - np.asarray(tv_distance(p, q), dtype=np.float64)}
    if "mpfr" in schemes:
        for b in Bs:
            out[f"mpfr_B{b}"] = np.asarray(exact_acceptance(p, q, "mpfr", b), dtype=np.float64)
    if "gls" in schemes:
        for b in (b for b in Bs if b >= 2):
            vals = np.empty(len(p))
            for i in range(len(p)):
                keep = (p[i] > 0) | (q[i] > 0)
                vals[i] = exact_acceptance(p[i, keep], q[i, keep], "gls", b)
            out[f"gls_B{b}"] = vals
    return out


def acceptance_profile(pair, prompts, drafts=None, *, B=(1, 2, 4), schemes=PROFILE_SCHEMES,
                       chat: bool = False, template: str = "default", max_tokens: int = 128,
                       max_contexts: int | None = None, progress: bool = True
                       ) -> AcceptanceProfile:
    """Per draft, the mean 1 - TV and exact MPFR/GLS acceptance over a prompt set's contexts.

    Parameters
    ----------
    pair : ModelPair
        Supplies the target, the shared processing and the default draft.
    prompts : sequence of str
        Prompt texts (e.g. ``specbound.llm.prompts("humaneval", 8)``).
    drafts : sequence of draft specs, optional
        Drafts to compare (built with ``pair.with_draft``, sharing the loaded target);
        default: the pair's own draft.  Specs that parse to the same draft
        (``"temperature:1"`` and ``"temperature:1.0"``) are one draft, profiled once;
        different drafts stay apart however close (``temperature:1.0000001`` is not
        ``temperature:1``), each under its exact spec text (``str(DraftSpec)``).
    B : int or sequence of int, default (1, 2, 4)
        Numbers of drafts for the exact MPFR (and, ``B >= 2``, GLS) acceptance.
    schemes : subset of {"mpfr", "gls"}
        Exact acceptances to compute besides ``one_minus_tv``.
    chat : bool, default False
        Chat-format each prompt before tokenizing (``pair.encode_prompt``); the default
        profiles the prompt text itself.
    template : str, default "default"
        Chat template for ``pair.encode_prompt``.
    max_tokens : int, default 128
        Each prompt is cut to its first ``max_tokens`` tokens.
    max_contexts : int, optional
        At most this many (evenly spaced) contexts per prompt.
    progress : bool, default True
        Show a tqdm progress bar over prompts on stderr (a profile of a few dozen prompts
        and several drafts runs for minutes on a CPU); ``False`` keeps the call silent.

    Returns
    -------
    AcceptanceProfile

    Raises
    ------
    ValueError
        Empty or non-string ``prompts`` (or a prompt that is not valid Unicode text, named
        ``prompts[i]``); bad ``drafts``, ``B``, ``schemes``, ``max_tokens``,
        ``max_contexts``, ``chat``, ``template``, ``progress``.
    """
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError("prompts: must be a non-empty sequence of prompt strings")
    for i, t in enumerate(prompts):
        if not isinstance(t, str):
            raise ValueError(f"prompts[{i}]: every prompt must be a string, got "
                             f"{type(t).__name__}")
        check_text(t, f"prompts[{i}]")
    Bs = _as_B_list(B)
    if isinstance(schemes, str):
        schemes = (schemes,)
    elif not isinstance(schemes, Sequence | set | frozenset):
        raise ValueError(f"schemes: must be a subset of {list(PROFILE_SCHEMES)}, got "
                         f"{schemes!r}")
    schemes = tuple(schemes)
    bad = [s for s in schemes if not isinstance(s, str) or s not in PROFILE_SCHEMES]
    if bad:
        raise ValueError(f"schemes: must be a subset of {list(PROFILE_SCHEMES)}, got {bad[0]!r}")
    max_tokens = as_int(max_tokens, "max_tokens", min_value=1)
    if max_contexts is not None:
        max_contexts = as_int(max_contexts, "max_contexts", min_value=1)
    chat = as_bool(chat, "chat")
    as_choice(template, "template", TEMPLATES)
    progress = as_bool(progress, "progress")
    if not hasattr(pair, "draft_spec") or not callable(getattr(pair, "with_draft", None)):
        raise ValueError(f"pair: must be a ModelPair (specbound.llm.load_pair), got "
                         f"{type(pair).__name__}")
    if drafts is None:
        pairs = [pair]
    else:
        if isinstance(drafts, str):
            drafts = [drafts]
        from specbound.llm.drafts import DraftSpec, parse_draft

        if isinstance(drafts, DraftSpec):
            drafts = [drafts]
        elif not isinstance(drafts, Sequence) or not drafts:
            raise ValueError("drafts: must be a draft spec or a non-empty sequence of them")
        # one entry per distinct draft (the spec itself, not a rounded text), first-seen order
        specs = list(dict.fromkeys(parse_draft(d) for d in drafts))
        pairs = [pair if s == pair.draft_spec else pair.with_draft(s) for s in specs]
    encoded = [pair.encode_prompt(t, chat=chat, template=template)[:max_tokens]
               for t in prompts]
    iterator = enumerate(encoded)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, total=len(encoded), desc="acceptance profile", unit="prompt")
    rows = []
    per_draft = [[] for _ in pairs]
    for i, ids in iterator:
        pos = _positions(len(ids), max_contexts)
        p = pair.target_logprobs(ids, num_positions=None).numpy()[0][pos]
        for k, dp in enumerate(pairs):
            q = dp.draft_logprobs(ids, num_positions=None).numpy()[0][pos]
            frame = pd.DataFrame({"draft": str(dp.draft_spec), "prompt": i, "position": pos,
                                  **_metrics(p, q, Bs, schemes)})
            rows.append(frame)
            per_draft[k].append(frame)
    contexts = pd.concat(rows, ignore_index=True)
    metrics = [c for c in contexts.columns if c not in ("draft", "prompt", "position")]
    summary = []
    for dp, frames in zip(pairs, per_draft, strict=True):
        sub = pd.concat(frames, ignore_index=True)
        rec = {"draft": str(dp.draft_spec), "n_prompts": int(sub["prompt"].nunique()),
               "n_contexts": len(sub)}
        for m in metrics:
            x = sub[m].to_numpy()
            rec[m] = float(x.mean())
            rec[f"{m}_stderr"] = _cluster_stderr(x, sub["prompt"].to_numpy())
        summary.append(rec)
    return AcceptanceProfile(contexts=contexts, summary=pd.DataFrame(summary))
