"""Numbers from formulas: couplings, acceptance bounds, exact acceptance, lossy rules,
watermark scores.  Deterministic (no randomness); imports neither ``sim`` nor ``llm``."""

from specbound.theory.acceptance import (
    SCHEMES,
    active_set_bound,
    exact_acceptance,
    lml_bound,
    lml_nonidentical_bound,
    lml_relaxed_bound,
    pml_alpha,
    pml_bound,
    pml_weak_bound,
)
from specbound.theory.blocks import (
    BLOCK_SCHEMES,
    expected_block_tokens,
    mpfr_multiplicity_law,
)
from specbound.theory.blockver import blockver_block_tokens
from specbound.theory.divergences import kl_divergence, no_communication_limit, tv_distance
from specbound.theory.efficiency import block_efficiency
from specbound.theory.hsd import HSD_ACCEPTANCES, hsd_block_tokens
from specbound.theory.lossy import (
    RULE_PARAMS,
    RULES,
    Distortion,
    acceptance_function,
    acceptance_rate,
    distortion,
    induced_distribution,
    judge_delta,
    lenience_delta,
)
from specbound.theory.tree import (
    TREE_RULES,
    eta_allowed,
    kl_truncation_sd,
    kl_truncation_tree,
    min_p_allowed,
    tree_acceptance,
    tree_block_efficiency,
    tree_emitted_distribution,
    truncated_target,
    truncation_efficiency_delta,
)
from specbound.theory.watermark import (  # noqa: F401
    LLR_NULL_METHODS,
    LLR_REWEIGHTS,
    LLR_SCORES,
    SCORES,
    aaronson_entropy_bound,
    aaronson_log_pvalue,
    aaronson_score,
    anlppt,
    empirical_threshold,
    expected_aaronson_score,
    lattimore_log_pvalue,
    lattimore_score,
    li_log_pvalue,
    li_score,
    llr_log_pvalue,
    llr_null_laws,
    llr_token_scores,
    null_log_sf,
    reweighted_distribution,
    robust_llr_levels,
    score_log_pvalue,
    score_threshold,
    token_scores,
    tpr_at_fpr,
    u_score,
    u_score_log_pvalue,
)

__all__: list[str] = [
    # option names (tuples; every other list of names is derived from them)
    "SCHEMES",
    "RULES",
    "RULE_PARAMS",
    "TREE_RULES",
    "SCORES",
    "tv_distance",
    "kl_divergence",
    "no_communication_limit",
    "pml_alpha",
    "pml_bound",
    "pml_weak_bound",
    "lml_bound",
    "lml_relaxed_bound",
    "lml_nonidentical_bound",
    "active_set_bound",
    "exact_acceptance",
    "Distortion",
    "acceptance_function",
    "acceptance_rate",
    "distortion",
    "eta_allowed",
    "induced_distribution",
    "judge_delta",
    "kl_truncation_sd",
    "kl_truncation_tree",
    "lenience_delta",
    "min_p_allowed",
    "tree_acceptance",
    "tree_block_efficiency",
    "tree_emitted_distribution",
    "truncated_target",
    "truncation_efficiency_delta",
    "block_efficiency",
]
__all__ += ["aaronson_entropy_bound", "aaronson_log_pvalue", "aaronson_score", "anlppt",
            "empirical_threshold",
            "expected_aaronson_score", "lattimore_log_pvalue", "lattimore_score", "li_log_pvalue",
            "li_score", "null_log_sf", "score_log_pvalue", "score_threshold", "token_scores",
            "tpr_at_fpr", "u_score", "u_score_log_pvalue"]
__all__ += ["LLR_NULL_METHODS", "LLR_REWEIGHTS", "LLR_SCORES", "llr_log_pvalue",
            "llr_null_laws", "llr_token_scores", "reweighted_distribution",
            "robust_llr_levels"]
__all__ += ["BLOCK_SCHEMES", "expected_block_tokens", "mpfr_multiplicity_law"]
__all__ += ["blockver_block_tokens"]
__all__ += ["HSD_ACCEPTANCES", "hsd_block_tokens"]
