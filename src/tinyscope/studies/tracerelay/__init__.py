"""TraceRelay: attention-aligned recurrence over rolling traces. The formal tasks (Equal Repeats,
bounded Dyck, Most-Freq) with exact samplers, the TraceRelay model with its naive reference beside
each fast kernel (``ops/``), decoding, Table 1 and the phase-inheritance ablation."""
EXPERIMENT_MODULES = ("experiment",)
