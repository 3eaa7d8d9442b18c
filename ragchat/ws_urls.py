"""Every websocket route of the project. Apps add theirs here."""

from chat.ws_urls import websocket_urlpatterns as _chat_ws
from documents.routing import websocket_urlpatterns as _documents_ws
from routing.ws_urls import websocket_urlpatterns as _routing_ws

websocket_urlpatterns: list = [*_chat_ws, *_documents_ws, *_routing_ws]
