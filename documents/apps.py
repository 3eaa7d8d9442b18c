from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Tags live here, so this app hands the RAG core its owner lookup; ragchat.runtime imports
        # no app (no import cycle between the project package and the apps).
        from documents.selectors import tag_owner_lookup
        from ragchat import runtime

        runtime.provide_owner_lookup(tag_owner_lookup)
