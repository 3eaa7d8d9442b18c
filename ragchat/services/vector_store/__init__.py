"""The vector store: chunks in Qdrant, searched with the access filter at every stage.

access.py   the access rule (tenant + tags) as neutral conditions, and its re-check
payload.py  what a stored point is: id, dense and BM25 vectors, the chunk's payload
backend.py  the interface both stores implement (stages, hits, collection metadata)
edge.py     EdgeBackend: Qdrant Edge in-process, on disk (the embedded default)
server.py   ServerBackend: a Qdrant server or cluster through qdrant-client (scale-out)
fusion.py   client-side RRF of the stages with a deterministic tie-break
service.py  VectorService, which composes them; what the rest of the project calls
"""

from ragchat.services.vector_store.access import PUBLIC_TAG, access_conditions
from ragchat.services.vector_store.edge import EdgeBackend
from ragchat.services.vector_store.payload import point_id
from ragchat.services.vector_store.server import ServerBackend
from ragchat.services.vector_store.service import SEARCH_MODES, VectorService

__all__ = [
    "PUBLIC_TAG",
    "SEARCH_MODES",
    "EdgeBackend",
    "ServerBackend",
    "VectorService",
    "access_conditions",
    "point_id",
]
