"""FrozenLake's exact Q-values, in one place: value iteration on the map's transition model (``solve``), the
prompt/completion records and the Gemma CSV made from them (``records``), ``rlft data export-q`` writing them as
a dataset (``export``), and the table that evaluation and the q-advantage reward read back (``table``)."""
