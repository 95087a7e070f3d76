"""One package per paper. Each study imports the core (``tinyscope.models``, ``tasks``, ``train``,
``runs``, ``interp``, ``report``) and never another study; the core never imports a study.

A study's ``__init__`` imports nothing: it names the modules that register its experiments in
``EXPERIMENT_MODULES`` (default ``("experiment",)``), which :mod:`tinyscope.runs.registry` imports
when it discovers the studies.
"""
