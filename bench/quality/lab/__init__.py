"""The parts of ``bench.quality.recall_lab`` (the script and its command line stay there):
building its kept database (``build``), reading features from it (``features``), ranking
variants and the learned fusion (``ranking``), relevance and abstention (``relevance``),
second readers of the top candidates (``rerank``, ``late_interaction``) and in-process
timing (``timing``)."""
