"""Result types of the simulators (re-exported from :mod:`specbound.results`)."""

from specbound.results import (
    ConfidenceInterval,
    Estimate,
    EstimateBatch,
    ResultBatch,
    proportion_ci,
)

__all__ = ["ConfidenceInterval", "Estimate", "EstimateBatch", "ResultBatch", "proportion_ci"]
