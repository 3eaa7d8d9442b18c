"""Pytest fixtures that put external services' stand-ins in tests (the fake Ollama server itself is
a supported module of the project: ragchat/fake_ollama)."""
