"""The run infrastructure: the Experiment contract, the registry that discovers the studies, run
directories, the claims ledger and the zoo."""
