"""NC-FFN (Oskin, "Explicit Fuzzy Logic in the Feed-Forward Layer"): negation-capable FFN units,
self-forgetting sequence quantifiers, the licensing language, the N-bit parity bases, legibility."""
EXPERIMENT_MODULES = ("experiment", "paper_lm")
