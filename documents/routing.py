from django.urls import path

from documents.consumers import DocumentProgressConsumer

websocket_urlpatterns = [path("ws/documents/", DocumentProgressConsumer.as_asgi())]
