from django import forms
from django.contrib import admin, messages
from django.db.models import Count

from access.admin import TenantScopedAdmin
from documents import services
from documents.models import Document, Tag
from documents.tasks import ingestion_enqueue


class TagAdminForm(forms.ModelForm):
    class Meta:
        model = Tag
        fields = "__all__"
        help_texts = {
            "owner": "The person who answers this tag's questions when the documents are not enough, and who "
            "may upload, replace and delete its documents. Without an owner, questions go to the admins.",
            "members": "People who may read this tag's documents in their answers (the owner may too). "
            "Everyone reads documents tagged Public.",
            "slug": "The tag's id, stored with every chunk of its documents: changing it needs a re-index.",
        }


@admin.register(Tag)
class TagAdmin(TenantScopedAdmin):
    form = TagAdminForm
    list_display = ("name", "slug", "owner", "member_count", "document_count")
    search_fields = ("name", "slug", "description")
    autocomplete_fields = ("owner", "members")
    prepopulated_fields = {"slug": ("name",)}
    ordering = ("name",)  # the changelist and autocomplete paginate: a stable order

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("owner")
            .annotate(_members=Count("members", distinct=True), _documents=Count("documents", distinct=True))
        )

    @admin.display(description="Members", ordering="_members")
    def member_count(self, tag):
        return tag._members

    @admin.display(description="Documents", ordering="_documents")
    def document_count(self, tag):
        return tag._documents


@admin.register(Document)
class DocumentAdmin(TenantScopedAdmin):
    list_display = (
        "title",
        "status",
        "kind",
        "tag_list",
        "chunk_count",
        "pages",
        "version",
        "uploaded_by",
        "created_at",
    )
    list_filter = ("status", "kind", ("tags", admin.RelatedOnlyFieldListFilter))
    search_fields = ("title", "original_filename", "content_hash")
    autocomplete_fields = ("tags", "uploaded_by")
    actions = ["reindex", "delete_with_vectors"]
    readonly_fields = (
        "id",
        "tenant_id",
        "original_filename",
        "file",
        "content_hash",
        "mime_type",
        "kind",
        "size",
        "status",
        "stage",
        "progress",
        "error",
        "pages",
        "chunk_count",
        "warnings",
        "version",
        "created_at",
        "updated_at",
        "indexed_at",
    )
    fields = ("title", "tags", "uploaded_by", *readonly_fields)

    def has_add_permission(self, request):
        return False  # uploads go through the upload page (validation, hashing, ingestion)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("uploaded_by").prefetch_related("tags")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # it would leave the chunks in the index
        return actions

    @admin.display(description="Tags")
    def tag_list(self, document):
        return ", ".join(tag.slug for tag in document.tags.all())

    def save_related(self, request, form, formsets, change):
        before = set(form.instance.tags.values_list("slug", flat=True)) if change else set()
        title_changed = "title" in form.changed_data
        super().save_related(request, form, formsets, change)
        after = set(form.instance.tags.values_list("slug", flat=True))
        document = form.instance
        # Chunks carry the tags and the title: changing them means re-indexing.
        if change and (before != after or title_changed) and not document.is_busy:
            services.document_requeue(document=document)
            ingestion_enqueue(document.id)
            self.message_user(request, "Tags or title changed: the document is being re-indexed.", messages.INFO)

    @admin.action(description="Re-index selected documents")
    def reindex(self, request, queryset):
        started = skipped = 0
        for document in queryset:
            if document.status == Document.Status.PROCESSING and not document.is_stale:
                skipped += 1
                continue
            services.document_requeue(document=document)
            ingestion_enqueue(document.id)
            started += 1
        self.message_user(
            request, f"Re-indexing {started} document(s)." + (f" {skipped} busy, skipped." if skipped else "")
        )

    @admin.action(description="Delete selected documents and their indexed chunks", permissions=["delete"])
    def delete_with_vectors(self, request, queryset):
        deleted = chunks = 0
        for document in queryset:
            chunks += services.document_delete(document=document)
            deleted += 1
        self.message_user(request, f"Deleted {deleted} document(s) and {chunks} chunk(s).")

    def delete_model(self, request, obj):
        services.document_delete(document=obj)

    def delete_queryset(self, request, queryset):
        for document in queryset:
            services.document_delete(document=document)
