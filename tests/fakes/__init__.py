"""Test doubles that replace external services at their protocol boundary (real HTTP, real sockets)."""
