"""Spec v3 exception hierarchy, plus the vector-store and embedding layers' own errors.

Callers map these to what users see; a message here is for logs and developers.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""


class RAGServiceError(Exception):
    """Base exception for RAG service errors."""


class LLMConnectionError(RAGServiceError):
    """Cannot connect to the model server (Ollama or the OpenAI-compatible one)."""


class LLMTimeoutError(RAGServiceError):
    """LLM response timed out."""


class ModelNotAllowedError(RAGServiceError):
    """Requested model not in allowlist."""


class ModelUnavailableError(RAGServiceError):
    """Model not available on the model server."""


class ContextError(RAGServiceError):
    """Failed to retrieve or format context."""


class TokenBudgetExceededError(RAGServiceError):
    """System prompt + response reserve exceeds context window."""


class LLMResponseError(RAGServiceError):
    """The model server answered, but with an error (HTTP 5xx after retries, malformed or cut stream)."""


class EmptyAnswerError(LLMResponseError):
    """The model's reply held no answer: nothing, or only its thinking."""


class VectorStoreError(ContextError):
    """The vector store failed or is unreachable."""


class CollectionMismatchError(VectorStoreError):
    """The collection was built with another embedding model or dimension."""


class EmbeddingError(ContextError):
    """The embedder failed or returned vectors of the wrong shape."""


class DocumentError(Exception):
    """Base for document parsing and chunking problems; the message is shown to the uploader."""


class UnsupportedDocumentError(DocumentError):
    """The content is not a type we can read."""


class CorruptDocumentError(DocumentError):
    """The file claims a type but cannot be read as it."""


class EncryptedDocumentError(DocumentError):
    """The file is password protected."""


class DocumentTooLargeError(DocumentError):
    """The file, or what it unpacks to, is over a limit."""


class EmptyDocumentError(DocumentError):
    """The file holds no text."""
