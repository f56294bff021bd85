"""Results that reproduce: experiment records per seed, their summaries and plots under ``results/``, and the
README's tables rendered from those files (never typed by hand).

``record`` writes ``results/NAME/seed-S.json`` (the metrics of one seed's reports and runs, with the machine,
the package versions, the commit and the reproducing command); ``summary`` aggregates the seeds into
``results/NAME/summary.json`` and a PNG; benchmarks write ``results/benchmarks/NAME.json`` in the same table
form; ``render`` rewrites the README blocks between ``<!-- results:NAME -->`` markers from them.
"""
