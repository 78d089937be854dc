"""Numbers from sampling: keyed randomness, token-level samplers, estimators, synthetic
language models and speculative decoders (Numba kernels behind validated wrappers)."""

from specbound.sim.batch import DecodeBatch, speculative_decode_batch
from specbound.sim.calibration import CalibratedLM, calibrated_lm, entropy_bounds
from specbound.sim.decode import (
    DECODER_SCHEME,
    DECODERS,
    DecodeBackend,
    DecodeResult,
    SyntheticBackend,
    WatermarkConfig,
    acceptance_compensator,
    expected_block_tokens,
    speculative_decode,
)
from specbound.sim.decoders import DECODER_SPECS, DecoderSpec
from specbound.sim.detect import (
    DetectionBatch,
    DetectionResult,
    Pivots,
    acceptance_coins,
    detect,
    detect_many,
    keyed_pivots,
)
from specbound.sim.distributions import (
    NoisyDraft,
    dirichlet,
    mixture_draft,
    noisy_draft,
    softmax_gaussian,
    temperature_draft,
    top_k,
    zipf,
)
from specbound.sim.gof import (
    GofResult,
    bonferroni_alpha,
    chisquare_gof,
    counts_from_samples,
    gof_test,
    multinomial_exact_gof,
)
from specbound.sim.invariance import check_drafter_invariance
from specbound.sim.logged import DenseBatch, LogReader, LogWriter, SparseBatch
from specbound.sim.lossy import RULE_SPECS, RuleSpec, sample_induced
from specbound.sim.lossy_seq import lossy_decode, lossy_decode_batch
from specbound.sim.metrics import cluster_ratio_se, lcs_length, mean_se, rouge_l
from specbound.sim.models import (
    CachedLM,
    MarkovLM,
    PromptSet,
    SyntheticLM,
    log_perplexity,
    random_prompts,
)
from specbound.sim.montecarlo import estimate_acceptance, sample_emitted
from specbound.sim.prf import keyed_uniforms
from specbound.sim.results import ConfidenceInterval, Estimate
from specbound.sim.samplers import (
    SAMPLERS,
    PublicSample,
    Step,
    mpfr_public,
    sample_step,
    spectr_rho,
)
from specbound.sim.tree import TreeVerificationResult, simulate_tree_verification

__all__ = [
    # keyed randomness, results
    "keyed_uniforms", "Estimate", "ConfidenceInterval",
    # token-level samplers and estimators
    "SAMPLERS", "Step", "sample_step", "spectr_rho", "estimate_acceptance", "sample_emitted",
    "PublicSample", "mpfr_public",
    # goodness of fit
    "GofResult", "bonferroni_alpha", "chisquare_gof", "counts_from_samples", "gof_test",
    "multinomial_exact_gof",
    # distributions and logs
    "NoisyDraft", "dirichlet", "mixture_draft", "noisy_draft", "softmax_gaussian",
    "temperature_draft", "top_k", "zipf", "DenseBatch", "LogReader", "LogWriter", "SparseBatch",
    # lossy verification
    "RULE_SPECS", "RuleSpec", "TreeVerificationResult", "sample_induced",
    "simulate_tree_verification",
    # sequence level
    "DecodeResult", "MarkovLM", "SyntheticLM", "check_drafter_invariance",
    "expected_block_tokens", "speculative_decode", "DecodeBatch", "speculative_decode_batch",
    "DECODERS", "DECODER_SCHEME", "DECODER_SPECS", "DecoderSpec", "DecodeBackend",
    "SyntheticBackend", "WatermarkConfig",
    "acceptance_compensator", "CachedLM", "PromptSet", "log_perplexity", "random_prompts",
    # sequence-level lossy verification
    "lossy_decode", "lossy_decode_batch",
    # entropy-calibrated synthetic models
    "CalibratedLM", "calibrated_lm", "entropy_bounds",
    # sequence-level metrics
    "cluster_ratio_se", "lcs_length", "mean_se", "rouge_l",
    # detection
    "DetectionBatch", "DetectionResult", "Pivots", "acceptance_coins", "detect", "detect_many",
    "keyed_pivots",
]
