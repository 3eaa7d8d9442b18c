"""Retrieval quality evaluation: a generated evaluation corpus with gold questions, and the runner
behind `manage.py evaluate` (scratch collection, recall/MRR/nDCG, support, citations, leakage)."""
