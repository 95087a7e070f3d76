"""Fully interpretable minimal transformers (Mahajne & Moldwin): plus-last-even, the 2-dimensional
single-head transformer, its geometric walkthrough (Fig. 2-15) and the five training movies (Sec. 6)."""
EXPERIMENT_MODULES = ("experiment",)
