"""Hand-set weights of the spatial-induction circuits (App. E-H): spatio-temporal addressing,
injective colorings, Construction I (Dedicated heads), Construction II (Shared head) and the Layer-2
matching head."""
