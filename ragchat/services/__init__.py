"""The stateless RAG core. Imports nothing from Django; configuration and lookups are passed in."""
