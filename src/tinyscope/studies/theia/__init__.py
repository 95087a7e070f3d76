"""THEIA (Li): complete Kleene three-valued logic in a modular network of arithmetic, order, set and
logic engines; the mod-3 chain; baselines; probes and activation patching."""
EXPERIMENT_MODULES = ("experiment",)
