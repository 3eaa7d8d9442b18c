"""Prompt templates and fixed answers, verbatim from spec v3 "Prompt Templates" and "Zero-Context
Handling", plus the direct replies to greetings and thanks (R-CHAT-6).

The spec's texts are copied character for character: tests and the model's behaviour depend on them.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

RAG_SYSTEM_PROMPT = """You are a helpful assistant that answers questions based ONLY on the provided context.

STRICT RULES:
1. ONLY use information from the provided CONTEXT sections below
2. If the context doesn't contain enough information, respond with: "I don't have enough information in the available documents to answer this question."
3. NEVER use external knowledge or make assumptions beyond the context
4. Cite sources using the exact SourceId provided (e.g., [SourceId: 550e8400-e29b-41d4-a716-446655440000:0])
5. Be concise but thorough
6. If partially answerable, answer what you can and note what's missing

CONTEXT (each section has a SourceId for citation):
{context}

PREVIOUS CONVERSATION:
{chat_history}
"""

# spec v3 "Context Chunk Format"; page and section print as N/A when unknown.
CONTEXT_CHUNK_FORMAT = """[SourceId: {document_id}:{chunk_index}]
[Document: {document_name}]
[Page: {page_number}] [Section: {section}]
---
{chunk_text}
---"""

# Chunks in the CONTEXT block are separated by one blank line.
CONTEXT_CHUNK_SEPARATOR = "\n\n"

CONFIDENCE_PROMPT = """Evaluate how well this answer is supported by the provided context.

CONTEXT SUMMARY:
{context_summary}

QUESTION: {query}

ANSWER: {answer}

Rate the support level from 0-100:
- 90-100: Answer is fully and directly supported by context
- 70-89: Answer is mostly supported, minor inferences made
- 50-69: Answer is partially supported, some gaps filled
- 30-49: Answer has weak support, significant assumptions
- 0-29: Answer is not supported by context

Respond with ONLY a number between 0 and 100."""

# spec v3 INSUFFICIENT_CONTEXT_RESPONSE: its answer text and its route reason.
INSUFFICIENT_CONTEXT_ANSWER = (
    "I don't have enough information in the available documents to answer this question. "
    "Please contact the relevant team for assistance."
)
INSUFFICIENT_CONTEXT_REASON = "No relevant documents found"

# The sentence the system prompt tells the model to use when context is not enough (rule 2).
MODEL_INSUFFICIENT_SENTENCE = "I don't have enough information in the available documents to answer this question."

# Direct replies to small talk (R-CHAT-6): no retrieval, no LLM, never routed.
SMALLTALK_REPLIES: dict[str, str] = {
    "greeting": "Hello! Ask me anything about the company documents you have access to.",
    "thanks": "You're welcome! Let me know if there's anything else I can look up for you.",
    "goodbye": "Goodbye! Come back any time you have a question about the documents.",
}
