"""Notebook cells in Vivarium, loaded into every template as `vivarium_ipy` (issue 49): IPython's
magics and `!` lines translated as IPython's input transformers do. Being written."""
