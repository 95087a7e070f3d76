"""Universal transformers for circuit computations (Ito, Puri, Campbell, Ram): expression grammars and
their evaluators, the looped circuit transformer, its hand-set construction and the looped softmax
baselines, length generalization to depth 30."""
EXPERIMENT_MODULES = ("experiment", "crvnn_experiment")
