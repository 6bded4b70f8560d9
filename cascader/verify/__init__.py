"""Checks of a design point against independent computations: the integer reference of the
legalized model, LiteRT on the original model, and the stripe schedule executed on the
reference. Model-level: it reads TFLite files through the frontend."""
