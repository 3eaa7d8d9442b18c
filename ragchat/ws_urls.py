"""Every websocket route of the project. Apps add theirs here."""

websocket_urlpatterns: list = []
