"""The parts of ``bench.scale.recall_scale`` (its docstring, command line and measuring
loop stay there): what they share (``common``), the synthetic store (``store``), the
dataset of real text (``text``), the approximate path's curve and diagnosis
(``approximate``) and the ``--breakdown`` paths (``breakdown``)."""
