"""Benchmarks behind `manage.py bench`: ingestion
throughput, filtered search latency, time to first token and concurrent streaming through a real
websocket. Timings are measured here, never asserted in timed tests."""
