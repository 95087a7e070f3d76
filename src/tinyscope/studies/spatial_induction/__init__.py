"""Spatial induction heads: in-context learning of multidimensional cellular automata (paper 000 of
``shared/papers``; Sec. 3, App. C-I).

Data API (numpy only)::

    lat = Lattice((16,), ELEMENTARY, V=2)                   # torus, neighbourhood, states   (lattice.py)
    traj = evolve(lat, tables, T, rng)                       # (B, T, *shape) uint8           (evolve.py)
    layout = Layout(lat, T); stream = layout.serialize(traj) # (B, N-1) tokens, rho / unrho   (serialize.py)
    pred = posterior_predictive(lat, traj, alpha=1.0)        # Theorem 3 at every cell        (bayes.py)

Rules and their symmetries are in ``rules.py`` and ``symmetry.py``, the train / val-out / test pools
in ``splits.py``, the task in ``task.py``, the TF / AR / KL metrics in ``metrics.py`` and
``rollout.py``, the hand-set circuits (App. E-H) in ``constructions/``, the mechanistic analysis
(App. I.5-I.8) in ``analysis.py``.
"""
EXPERIMENT_MODULES = ("experiment", "compiled", "figure1")
