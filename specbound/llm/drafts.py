r"""Draft models made from a target: ``temperature:T``, ``early_exit:K``, ``quantized:BITS``,
``model:ID_OR_PATH``.

Every draft is a real ``torch.nn.Module`` of the target's own transformers class (a
``PreTrainedModel`` with ``generate``), so the same module can be handed to transformers'
assisted generation as ``assistant_model``.  Drafts built from the target are *views*: a
new model object whose submodules are the target's own modules, except the one part the
draft changes; the target itself is never modified.

``temperature:T`` (:math:`T > 0`)
    The target with its output head replaced by :class:`TemperatureHead`, which returns the
    target's logits cast to float64 and divided by ``T``; every weight is shared.  These are
    the drafters D2 (:math:`T = 0.5`) and D3 (:math:`T = 1.5`) of Liu, Wan, Gao & Gündüz
    (2026, arXiv:2609.21858), App. D.5, with the target itself as the drafter.
``early_exit:K`` (:math:`1 \le K \le` number of layers)
    The first ``K`` decoder layers, then the target's final norm and LM head (layer
    skipping as in self-speculative decoding, Zhang et al. 2024, arXiv:2309.08168; Elhoushi
    et al. 2024, arXiv:2404.16710, without their fine-tuning).  The layers, norm, embedding
    and head are the target's modules (same storage, no copy); the view's config says
    ``num_hidden_layers = K`` so that its KV cache has ``K`` layers.  ``K`` equal to the
    number of layers gives the target's own distribution.
``quantized:BITS`` or ``quantized:BITS:GROUP`` (BITS in {2, 3, 4}; GROUP >= 2, default 64)
    Copies of the target's decoder layers whose linear weights are re-quantized locally by
    round-to-nearest with an asymmetric (min-max) grid per group of ``GROUP`` consecutive
    input weights of each output row (:func:`rtn_quantize`; the RTN baseline of the GPTQ
    paper, Frantar et al. 2023, arXiv:2210.17323) and stored dequantized: each group takes
    at most :math:`2^{BITS}` distinct values.  Embedding, norms and LM head are shared with
    the target, unquantized (as GPTQ/AWQ leave them).
``ngram:N``, ``ngram:N:K`` or ``ngram:N:K:ar``, then optionally ``:min=M`` (1 <= M <= N) and
``:fixed=F:cost=S`` (F, S >= 0)
    Prompt lookup, no model: the last ``N`` committed tokens (prompt plus text so far) are
    looked up among their earlier occurrences in an index kept up to date token by token
    (:mod:`specbound.llm.ngram`), and the block drafts what followed the most recent one,
    at most ``K`` tokens (and at most ``L``; ``K`` absent: ``L``).  With ``min=M``, where the
    last ``N`` tokens never occurred, the longest shorter suffix (down to ``M`` tokens) that
    did is looked up instead (transformers' ``max_matching_ngram_size``), with a gate
    estimate of its own per matched length.  Its draft law is a
    point mass (``q`` one-hot) on the looked-up token; with ``B`` drafts, the continuations
    of the ``B`` most recent occurrences whose continuations differ (the law after a path:
    one equal weight per continuation through it).  An acceptance gate drafts only where it
    pays: with ``â`` the running acceptance of the lookup's proposals and a block of ``k``
    drafted tokens costing ``c_k = 1 + F + S (m (k + 1) - 1)`` single-token forwards (``m``
    the distinct continuations found, at most ``B``; ``F`` the fixed overhead of a
    many-token forward, ``S`` the cost per further token; defaults ``F = 0.5``, ``S = 0.1``,
    measured on one CPU core), the block drafts the ``k`` maximising ``E_k(â) / c_k``
    (``E_k(a) = 1 + a + ... + a^k``) if that ratio exceeds 1, i.e. where ``â`` clears the
    exact break-even acceptance; ``fixed=0:cost=0`` drafts every match to its full length.
    The choice depends on the committed tokens only, so the emitted law stays the target's
    and the run is deterministic given the seed.  Where no occurrence exists (or the gate
    says no) the block has no draft: the decoder's one-token step from the target's law (an
    ``ar`` step, one single-token target forward), never a drafted fallback, since on a CPU
    a derived draft costs more than it saves
    (``ngram:N:K:ar`` names this fallback explicitly; it is the only one).  It costs no
    model forward (``n_draft_forwards`` stays 0; the lookups' wall time is
    ``draft_seconds``).  ``pair.draft`` is the target itself, never called.
``model:ID_OR_PATH``
    A separate model (``"embedded"``, a Hugging Face model id, a local folder or a ``.gguf``
    file, loaded like the target).  Its tokenizer must equal the target's (same vocabulary,
    same ids), e.g. Qwen2.5-0.5B-Instruct for Qwen2.5-7B-Instruct, the pair of Liu et al.
    (2026), App. D.1.

Temperature and the shared logits processing: the pair applies one processing (temperature
:math:`\tau`, top-k, top-p, in transformers' order) to the target's and the draft's logits
alike.  A ``temperature:T`` draft's logits are already divided by ``T``, so its processed
distribution is the target's logits at temperature :math:`T\tau` (top-k keeps the same token
set as the target's, since scaling preserves the order; top-p keeps a different set).  The
other drafts have their own logits and are processed at :math:`\tau` like the target.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from types import MappingProxyType

from specbound.llm._deps import require_llm_extra
from specbound.llm._loading import load_model

torch = require_llm_extra()
nn = torch.nn

__all__ = ["DRAFT_DESCRIPTIONS", "DRAFT_KINDS", "NGRAM_FALLBACKS", "DraftSpec", "parse_draft",
           "TemperatureHead", "divide_logits", "rtn_quantize", "make_draft", "layer_count",
           "view_temperature"]

DRAFT_KINDS = ("temperature", "early_exit", "quantized", "ngram", "model")
#: the only fallback of an ``ngram`` draft where no occurrence exists (an ``ar`` step)
NGRAM_FALLBACKS = ("ar",)
QUANT_BITS = (2, 3, 4)
DEFAULT_GROUP = 64

#: one-line description of every draft kind of :data:`DRAFT_KINDS` (read-only)
DRAFT_DESCRIPTIONS = MappingProxyType({
    "temperature": "the target's logits divided by T, every weight shared (drafters D2/D3 of "
                   "Liu et al. 2026: T = 0.5, 1.5)",
    "early_exit": "the target's first K decoder layers + final norm + LM head, sharing their "
                  "weights (no copy)",
    "quantized": "the target's decoder-layer weights re-quantized to BITS bits, "
                 "round-to-nearest per group (default 64 weights), made locally",
    "ngram": "prompt lookup: the continuation of the most recent earlier occurrence of the "
             "last N tokens (q one-hot, at most K tokens, no model forward; drafted only where "
             "the running acceptance clears the break-even of the verify cost; otherwise "
             "an ar step)",
    "model": "a separate model with the target's tokenizer (e.g. Qwen2.5-0.5B-Instruct for "
             "Qwen2.5-7B-Instruct)",
})
_USAGE = ("draft: must be 'temperature:T', 'early_exit:K', 'quantized:BITS[:GROUP]', "
          "'ngram:N[:K[:ar]][:min=M][:fixed=F][:cost=S]' or 'model:ID_OR_PATH'")


def _float_text(t: float) -> str:
    """The shortest text of ``t`` that reads back as ``t`` exactly: ``format(t, "g")`` when
    it round-trips and is not longer (``1``, ``1.5``, ``0.5``), else ``repr(t)``
    (``1.0000001``, ``1e-320``)."""
    short, exact = format(t, "g"), repr(float(t))
    return short if float(short) == t and len(short) <= len(exact) else exact


@dataclass(frozen=True)
class DraftSpec:
    """A parsed draft specification (``str(spec)`` gives its canonical text).

    The text reads back as the same spec: ``parse_draft(str(spec)) == spec`` (a temperature
    is written with every digit it needs, ``temperature:1.0000001``), so two specs are one
    draft exactly when their texts are equal.

    Attributes
    ----------
    kind : {"temperature", "early_exit", "quantized", "ngram", "model"}
    value : float, int or str
        ``T``, ``K``, ``BITS``, ``N`` or the model source.
    group_size : int or None
        Quantization group (``quantized`` only).
    proposals : int or None
        ``K`` of ``ngram:N:K``: at most this many drafted tokens per block (None: ``L``).
    verify_cost : tuple of two floats, or None
        ``(F, S)`` of ``ngram:...:fixed=F:cost=S``: the acceptance gate's verify-cost model
        (None: the default, :data:`specbound.llm.ngram.DEFAULT_COST`; ``(0, 0)``: no gate).
    min_n : int or None
        ``M`` of ``ngram:N...:min=M`` (``1 <= M < N``): without an earlier occurrence of the
        last ``N`` tokens, the longest shorter suffix, down to ``M`` tokens, is looked up
        (None: ``N`` only).
    """

    kind: str
    value: float | int | str
    group_size: int | None = None
    proposals: int | None = None
    verify_cost: tuple | None = None
    min_n: int | None = None

    def __str__(self) -> str:
        if self.kind == "temperature":
            return f"temperature:{_float_text(self.value)}"
        if self.kind == "quantized" and self.group_size != DEFAULT_GROUP:
            return f"quantized:{self.value}:{self.group_size}"
        if self.kind == "ngram":
            k = "" if self.proposals is None else f":{self.proposals}"
            if self.min_n is not None:
                k += f":min={self.min_n}"
            c = ""
            if self.verify_cost is not None:
                f, s = self.verify_cost
                c = f":fixed={_float_text(f)}:cost={_float_text(s)}"
            return f"ngram:{self.value}{k}{c}"
        return f"{self.kind}:{self.value}"

    @property
    def description(self) -> str:
        """One line on what this kind of draft is."""
        return DRAFT_DESCRIPTIONS[self.kind]


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"draft: {what} must be an integer, got {text!r}") from None


#: largest n-gram length N and proposals per block K of an ``ngram:`` draft (every new token
#: updates N index keys of up to N tokens each; a block drafts at most the decoder's L <= 1024)
MAX_NGRAM = 1024


def _parse_ngram(rest: str) -> DraftSpec:
    """``N``, ``N:K`` or ``N:K:FALLBACK`` (FALLBACK: ``ar`` only), each optionally followed by
    ``:fixed=F`` and / or ``:cost=S`` (the gate's verify-cost model, finite numbers >= 0)."""
    from specbound.llm.ngram import DEFAULT_COST

    parts = rest.split(":")
    model = dict(zip(("fixed", "cost"), DEFAULT_COST, strict=True))
    seen: set = set()
    min_text = None
    while len(parts) > 1 and "=" in parts[-1]:
        name, _, text = parts.pop().strip().partition("=")
        name = name.strip()
        if name not in (*model, "min") or name in seen:
            raise ValueError(f"draft: ngram option {name!r} in 'ngram:{rest}' is not known or "
                             "repeated; the options are min=M, fixed=F and cost=S")
        seen.add(name)
        if name == "min":
            min_text = text.strip()
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"draft: ngram {name} (the verify-cost model) must be a finite "
                             f"number >= 0, got {text.strip()!r} in 'ngram:{rest}'")
        model[name] = value
    cost = (model["fixed"], model["cost"])
    cost = None if cost == tuple(DEFAULT_COST) else cost
    if len(parts) > 3:
        raise ValueError(f"draft: ngram takes N, N:K or N:K:FALLBACK (then optionally "
                         f":min=M:fixed=F:cost=S), got 'ngram:{rest}'")
    n = _int(parts[0].strip(), "ngram N")
    if not 1 <= n <= MAX_NGRAM:
        raise ValueError(f"draft: ngram N (the looked-up n-gram's length) must be >= 1 and "
                         f"<= {MAX_NGRAM}, got {n} in 'ngram:{rest}'")
    k = None
    if len(parts) >= 2:
        k = _int(parts[1].strip(), "ngram K")
        if not 1 <= k <= MAX_NGRAM:
            raise ValueError(f"draft: ngram K (drafted tokens per block) must be >= 1 and "
                             f"<= {MAX_NGRAM}, got {k} in 'ngram:{rest}'")
    if len(parts) == 3 and parts[2].strip() not in NGRAM_FALLBACKS:
        raise ValueError(
            f"draft: ngram fallback {parts[2].strip()!r} in 'ngram:{rest}' is not known; the "
            f"only fallback is {list(NGRAM_FALLBACKS)} (no occurrence: an ar step from the "
            "target's law; a drafted fallback would cost draft forwards where nothing is "
            "looked up)")
    min_n = None
    if min_text is not None:
        try:
            min_n = int(min_text)
        except ValueError:
            min_n = 0
        if not 1 <= min_n <= n:
            raise ValueError(f"draft: ngram min (the shortest looked-up suffix) must be an "
                             f"integer in [1, N = {n}], got {min_text!r} in 'ngram:{rest}'")
        min_n = None if min_n == n else min_n
    return DraftSpec("ngram", n, None, k, cost, min_n)


def parse_draft(draft) -> DraftSpec:
    """Parse ``"KIND:VALUE"`` into a :class:`DraftSpec` (``ValueError`` naming ``draft``)."""
    if isinstance(draft, DraftSpec):
        # a spec made by hand is checked like its text (the text of a parsed spec reads back
        # as the same spec)
        return parse_draft(str(draft))
    if not isinstance(draft, str) or ":" not in draft:
        raise ValueError(f"{_USAGE}, got {draft!r}")
    kind, _, rest = draft.partition(":")
    kind = kind.strip()
    if kind not in DRAFT_KINDS:
        raise ValueError(f"draft: unknown kind {kind!r}; kinds are {list(DRAFT_KINDS)}")
    if kind == "temperature":
        try:
            t = float(rest)
        except ValueError:
            t = math.nan
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"draft: temperature T must be a finite number > 0, got {rest!r}")
        return DraftSpec("temperature", t)
    if kind == "early_exit":
        k = _int(rest, "early_exit K")
        if k < 1:
            raise ValueError(f"draft: early_exit K must be >= 1, got {k}")
        return DraftSpec("early_exit", k)
    if kind == "quantized":
        parts = rest.split(":")
        if len(parts) > 2:
            raise ValueError(f"draft: quantized takes BITS or BITS:GROUP, got {rest!r}")
        bits = _int(parts[0], "quantized BITS")
        if bits not in QUANT_BITS:
            raise ValueError(f"draft: quantized BITS must be one of {list(QUANT_BITS)}, got "
                             f"{bits}")
        group = _int(parts[1], "quantized GROUP") if len(parts) == 2 else DEFAULT_GROUP
        if group < 2:
            raise ValueError(f"draft: quantized GROUP must be >= 2, got {group}")
        return DraftSpec("quantized", bits, group)
    if kind == "ngram":
        return _parse_ngram(rest)
    if not rest.strip():
        raise ValueError("draft: model needs a model id or path, e.g. 'model:embedded'")
    return DraftSpec("model", rest.strip())


# ----------------------------------------------------------------------------- views


def _view(module):
    """A new module object sharing ``module``'s submodules, parameters and buffers.

    Its registries (submodules, parameters, buffers, hooks) are shallow copies, so that
    replacing a child of the view leaves ``module`` untouched.
    """
    v = copy.copy(module)
    for name, value in list(vars(v).items()):
        if isinstance(value, dict | set | list):
            vars(v)[name] = copy.copy(value)
    return v


def _model_view(target):
    root = _view(target)
    root.config = copy.deepcopy(target.config)
    if getattr(target, "generation_config", None) is not None:
        root.generation_config = copy.deepcopy(target.generation_config)
    return root


_LAYER_PATHS = ("model.layers", "model.decoder.layers", "model.language_model.layers",
                "transformer.h", "transformer.layers", "gpt_neox.layers")


def _layer_path(model):
    for path in _LAYER_PATHS:
        obj, ok = model, True
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                ok = False
                break
        if ok and isinstance(obj, nn.ModuleList):
            return path.split("."), obj
    raise ValueError(
        f"draft: cannot find the decoder layers of {type(model).__name__} (looked for "
        f"{', '.join(_LAYER_PATHS)})"
    )


def layer_count(model) -> int:
    """Number of decoder layers of a transformers causal LM (``early_exit:K`` takes
    ``1 <= K`` below it); ``ValueError`` naming ``draft`` when the layer list is not found."""
    return len(_layer_path(model)[1])


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _replace_layers(target, layers):
    """A view of ``target`` whose decoder-layer list is ``layers`` (configs updated)."""
    parts, _ = _layer_path(target)
    root = _model_view(target)
    # map the target's config objects to the view's (inner models share them in transformers)
    configs = {id(target.config): root.config,
               id(_text_config(target.config)): _text_config(root.config)}
    parent, orig = root, target
    for part in parts[:-1]:
        orig = getattr(orig, part)
        child = _view(orig)
        cfg = getattr(orig, "config", None)
        if cfg is not None:
            if id(cfg) not in configs:
                configs[id(cfg)] = copy.deepcopy(cfg)
            child.config = configs[id(cfg)]
        setattr(parent, part, child)
        parent = child
    setattr(parent, parts[-1], nn.ModuleList(layers))
    for cfg in {id(c): c for c in configs.values()}.values():
        if hasattr(cfg, "num_hidden_layers"):
            if isinstance(getattr(cfg, "layer_types", None), list | tuple):
                cfg.layer_types = list(cfg.layer_types)[: len(layers)]
            cfg.num_hidden_layers = len(layers)
    return root


def divide_logits(logits, temperature: float):
    """``logits / temperature`` in the tensor's dtype, with the ``temperature -> 0`` limit.

    Where the quotient stays finite this is the plain division (bit for bit).  A row whose
    largest quotient overflows (``+inf``, or ``-inf`` when every logit is negative; e.g.
    ``temperature = 1e-320``) would give NaN after ``log_softmax``; such a row is divided
    after subtracting its maximum instead, ``(logits - max) / temperature``, which has the
    same softmax (softmax is shift-invariant) and cannot overflow upwards: its maximal
    entries are exactly 0 and the others are negative, ``-inf`` when they overflow.  So the
    processed distribution is the limit of the tempered softmax: the argmax, ties sharing the
    mass uniformly (as :func:`specbound.sim.temperature_draft`), never NaN.
    """
    y = logits / temperature
    top = y.amax(dim=-1, keepdim=True)
    bad = ~torch.isfinite(top)
    if bool(bad.any()):
        shifted = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
        y = torch.where(bad, shifted, y)
    return y


class TemperatureHead(nn.Module):
    """An output head that returns ``head(x)`` in float64 divided by ``temperature``.

    The division is done in float64 so that, after the shared processing at temperature
    ``tau``, the draft's logits are the target's float64 logits divided by ``T`` and then
    ``tau`` (two correctly rounded divisions, no float32 rounding in between).
    """

    def __init__(self, head, temperature: float):
        super().__init__()
        self.head = head
        self.temperature = float(temperature)

    @property
    def weight(self):
        return self.head.weight

    def forward(self, hidden_states):
        logits = self.head(hidden_states).to(torch.float64)
        return logits if self.temperature == 1.0 else divide_logits(logits, self.temperature)


def view_temperature(target, draft) -> float | None:
    """``T`` when ``draft`` is ``target`` itself at temperature ``T`` (else None).

    That is the module a ``temperature:T`` draft builds: a view of ``target`` whose output
    head is a :class:`TemperatureHead` over the target's own head and whose every other
    child is the target's child (the same objects), so its forward at a context computes
    the target's forward there and divides the logits by ``T`` in float64.
    """
    get = getattr(draft, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if not isinstance(head, TemperatureHead) or draft is target:
        return None
    if head.head is not target.get_output_embeddings():
        return None
    own = dict(target.named_children())
    for name, child in draft.named_children():
        if child is not head and own.get(name) is not child:
            return None
    return head.temperature


def _temperature_draft(target, t: float):
    head = target.get_output_embeddings()
    name = next((n for n, m in target.named_children() if m is head), None)
    if head is None or name is None:
        raise ValueError(
            f"draft: {type(target).__name__} has no top-level output head to rescale"
        )
    root = _model_view(target)
    setattr(root, name, TemperatureHead(head, t))
    return root


def rtn_quantize(weight, bits: int, group_size: int):
    """Round-to-nearest quantization per group, returned dequantized in ``weight``'s dtype.

    Each row of the 2-D ``weight`` (output x input) is cut into groups of ``group_size``
    consecutive input weights (the last group may be shorter); a group with minimum ``lo``
    and maximum ``hi`` is mapped to ``lo + k * s``, ``s = (hi - lo) / (2**bits - 1)``,
    ``k = round((w - lo) / s)`` clipped to ``0 .. 2**bits - 1`` (computed in float32).
    A group therefore takes at most ``2**bits`` distinct values; a constant group is exact.
    """
    levels = (1 << bits) - 1
    w = weight.detach().to(torch.float32)
    out = torch.empty_like(w)
    n_in = w.shape[1]
    full = (n_in // group_size) * group_size

    def quant(block):
        lo = block.amin(dim=-1, keepdim=True)
        scale = (block.amax(dim=-1, keepdim=True) - lo) / levels
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        k = (block - lo).div_(safe).round_().clamp_(0, levels)
        return k.mul_(scale).add_(lo)  # = lo + k * scale

    if full:
        out[:, :full] = quant(w[:, :full].reshape(w.shape[0], -1, group_size)).reshape(
            w.shape[0], full)
    if full < n_in:
        out[:, full:] = quant(w[:, full:])
    return out.to(weight.dtype)


def _quantizable(module):
    from transformers.pytorch_utils import Conv1D

    return isinstance(module, nn.Linear | Conv1D)


def _quantized_draft(target, bits: int, group: int):
    from transformers.pytorch_utils import Conv1D

    _, layers = _layer_path(target)
    new_layers = []
    for layer in layers:
        q = copy.deepcopy(layer)
        for mod in q.modules():
            if not _quantizable(mod):
                continue
            w = mod.weight.data
            if isinstance(mod, Conv1D):  # GPT-2 style: weight is (input, output)
                mod.weight.data = rtn_quantize(w.t(), bits, group).t().contiguous()
            else:
                mod.weight.data = rtn_quantize(w, bits, group)
        new_layers.append(q)
    return _replace_layers(target, new_layers)


def _same_vocab(a, b) -> bool:
    return a.get_vocab() == b.get_vocab()


def make_draft(target, tokenizer, draft, *, device, dtype):
    """Build the draft module for ``draft`` (a spec string or :class:`DraftSpec`).

    Returns ``(spec, module, load_info)``; ``load_info`` is ``None`` except for
    ``model:`` drafts.
    """
    spec = parse_draft(draft)
    if spec.kind == "temperature":
        return spec, _temperature_draft(target, spec.value), None
    if spec.kind == "early_exit":
        _, layers = _layer_path(target)
        if spec.value > len(layers):
            raise ValueError(
                f"draft: early_exit K must be <= the target's {len(layers)} layers, got "
                f"{spec.value}"
            )
        return spec, _replace_layers(target, list(layers)[: spec.value]), None
    if spec.kind == "quantized":
        return spec, _quantized_draft(target, spec.value, spec.group_size), None
    if spec.kind == "ngram":  # no model: the target stands in for it and is never called
        return spec, target, None
    model, tok, info = load_model(spec.value, device=device, dtype=dtype, name="draft")
    if not _same_vocab(tok, tokenizer):
        va, vb = tok.get_vocab(), tokenizer.get_vocab()
        differ = sum(1 for t, i in va.items() if vb.get(t) != i) + sum(
            1 for t in vb if t not in va)
        raise ValueError(
            f"draft: the tokenizer of {spec.value!r} does not match the target's "
            f"({len(va)} vs {len(vb)} entries, {differ} differ); a draft must share the "
            "target's vocabulary"
        )
    return spec, model, info
