"""Log-ICoT (Huang et al., "Transformers Provably Learn to Internalize Chain-of-Thought"): k-parity
with CoT, ICoT and Log-ICoT curricula, the constrained L-layer model, absorption of tree levels."""
EXPERIMENT_MODULES = ("experiment",)
