from django.urls import path

from routing.consumers import InboxConsumer, NavConsumer

websocket_urlpatterns = [path("ws/inbox/", InboxConsumer.as_asgi()), path("ws/nav/", NavConsumer.as_asgi())]
