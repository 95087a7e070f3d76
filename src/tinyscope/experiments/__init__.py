"""Deprecated: the run infrastructure moved to :mod:`tinyscope.runs` and each paper's experiments to
:mod:`tinyscope.studies`. Only ``tinyscope.experiments.runner`` is kept, as a warning alias."""
