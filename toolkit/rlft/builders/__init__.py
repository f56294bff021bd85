"""Dataset builders: experience (Minari, exact Q-values, other formats) through a codec into records, written in
the Hub layout of :mod:`rlft.hub` (``rlft data serialize``, ``rlft data export-q``, ``rlft data import``)."""
