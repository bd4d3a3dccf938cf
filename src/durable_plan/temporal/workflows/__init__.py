"""Workflow code: deterministic, replayed. It may import ``wire`` and lower layers, never
``activities``, ``client`` or ``worker`` (``tests/structure/test_determinism_boundary.py`` and
``tests/structure/test_layers.py`` hold it)."""
