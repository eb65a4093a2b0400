"""How right: recall@k, MRR, precision and agreement of ranking, abstention, summaries, classifiers, languages and procedures, on LoCoMo and the hand-labelled sets. Their figures do not depend on the machine's load.

bench/README.md lists them.
"""
