import csv

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count
from django.http import HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from access.admin import TenantScopedAdmin
from access.audit import audit_record
from access.models import AuditEvent, SyncedMembership
from documents import services
from documents.models import Document, GlossaryTerm, Tag
from documents.tasks import ingestion_enqueue
from ragchat.partials import render_partial
from ragchat.services.glossary import (
    GLOSSARY_CSV_COLUMNS,
    GlossaryCSVError,
    csv_header_ok,
    read_glossary_csv,
    write_glossary_csv,
)


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
    readonly_fields = ("synced_roles",)

    @admin.display(description="Synced from the identity provider")
    def synced_roles(self, tag):
        """Which of the members and the owner came from group sync; the others are manual."""
        rows = SyncedMembership.objects.filter(tag=tag).select_related("user") if tag.pk else []
        return render_partial("admin/documents/tag/_synced_roles.html", {"rows": rows})

    def save_model(self, request, obj, form, change):
        previous = Tag.objects.filter(pk=obj.pk).select_related("owner").first() if change else None
        super().save_model(request, obj, form, change)
        before = previous.owner if previous else None
        if (before.pk if before else None) != obj.owner_id:
            audit_record(
                action=AuditEvent.Action.TAG_OWNER_CHANGED,
                tenant_id=obj.tenant_id,
                actor=request.user,
                subject=obj.owner or before,
                summary=f"owner of {obj.name}: {before.get_username() if before else 'nobody'} → "
                f"{obj.owner.get_username() if obj.owner else 'nobody'}",
                data={
                    "tag": obj.slug,
                    "previous_owner": before.get_username() if before else None,
                    "new_owner": obj.owner.get_username() if obj.owner else None,
                    "source": "admin",
                },
                request=request,
            )

    def save_related(self, request, form, formsets, change):
        tag = form.instance
        before = set(tag.members.all()) if change else set()
        super().save_related(request, form, formsets, change)
        after = set(tag.members.all())
        for user, action, words in [
            *((u, AuditEvent.Action.MEMBERSHIP_ADDED, "added to") for u in sorted(after - before, key=str)),
            *((u, AuditEvent.Action.MEMBERSHIP_REMOVED, "removed from") for u in sorted(before - after, key=str)),
        ]:
            audit_record(
                action=action,
                tenant_id=tag.tenant_id,
                actor=request.user,
                subject=user,
                summary=f"{user.get_username()} {words} {tag.name} by hand",
                data={"tag": tag.slug, "role": "member", "source": "admin"},
                request=request,
            )

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
            chunks += services.document_delete(document=document, actor=request.user, request=request)
            deleted += 1
        self.message_user(request, f"Deleted {deleted} document(s) and {chunks} chunk(s).")

    def delete_model(self, request, obj):
        services.document_delete(document=obj, actor=request.user, request=request)

    def delete_queryset(self, request, queryset):
        for document in queryset:
            services.document_delete(document=document, actor=request.user, request=request)


# ------------------------------------------------------------------------------------- glossary

GLOSSARY_CSV_MAX_BYTES = 2 * 1024 * 1024
GLOSSARY_REPORT_LINES = 50  # skipped lines named one by one; the rest are counted


class GlossaryImportForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text="Columns tag, term, aliases (and optionally note), with a header row. The tag is its slug "
        '(or its name); aliases are separated by ";". Existing terms of the tag are updated.',
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > GLOSSARY_CSV_MAX_BYTES:
            raise forms.ValidationError(f"The file is larger than {GLOSSARY_CSV_MAX_BYTES // (1024 * 1024)} MB.")
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise forms.ValidationError("The file is not UTF-8 text.") from e
        try:
            header_ok = csv_header_ok(text)
        except csv.Error as e:
            raise forms.ValidationError(f"The file is not CSV: {e}") from e
        if not header_ok:
            raise forms.ValidationError("The first row must name the columns: tag, term, aliases (note optional).")
        return text


def glossary_import(*, tenant_id: str, text: str) -> dict:
    """Create or update the tenant's glossary terms from CSV text (header: tag, term, aliases[, note]).
    Rows naming an unknown tag or no term are skipped and reported by line number. Importing the
    same file twice changes nothing the second time."""
    tags = list(Tag.objects.filter(tenant_id=tenant_id))
    by_slug = {t.slug.lower(): t for t in tags}
    by_name = {t.name.strip().lower(): t for t in tags}
    created = updated = unchanged = 0
    skipped: list[str] = []
    with transaction.atomic():
        try:
            for row in read_glossary_csv(text):
                line = row.line
                tag = by_slug.get(row.tag.lower()) or by_name.get(row.tag.lower())
                if tag is None:
                    skipped.append(
                        f"line {line}: unknown tag {row.tag.lower()!r}" if row.tag else f"line {line}: no tag"
                    )
                    continue
                if not row.term:
                    skipped.append(f"line {line}: no term")
                    continue
                if len(row.term) > GlossaryTerm._meta.get_field("term").max_length:
                    skipped.append(f"line {line}: the term is too long")
                    continue
                aliases = "\n".join(row.aliases)
                existing = GlossaryTerm.objects.filter(tag=tag, term__iexact=row.term).first()
                if existing is None:
                    GlossaryTerm.objects.create(tag=tag, term=row.term, aliases=aliases, note=row.note or "")
                    created += 1
                    continue
                changes = {"term": row.term, "aliases": aliases}
                if row.note is not None:  # a file without the note column keeps the notes
                    changes["note"] = row.note
                if all(getattr(existing, k) == v for k, v in changes.items()):
                    unchanged += 1
                    continue
                for k, v in changes.items():
                    setattr(existing, k, v)
                existing.save()
                updated += 1
        except GlossaryCSVError as e:
            skipped.append(f"{e}; the rest of the file was not read")
    return {"created": created, "updated": updated, "unchanged": unchanged, "skipped": skipped}


def glossary_csv(terms) -> str:
    """The terms as CSV in the import's format (tag slug, term, aliases separated by "; ", note)."""
    ordered = sorted(terms, key=lambda t: (t.tag.slug, t.term.lower(), t.pk))
    return write_glossary_csv((t.tag.slug, t.term, t.alias_list, t.note) for t in ordered)


@admin.register(GlossaryTerm)
class GlossaryTermAdmin(TenantScopedAdmin):
    list_display = ("term", "tag", "alias_summary", "updated_at")
    list_filter = (("tag", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("term", "aliases", "note", "tag__name", "tag__slug")
    autocomplete_fields = ("tag",)
    ordering = ("tag__name", "term", "pk")
    fields = ("tag", "term", "aliases", "note", "tenant_id", "created_at", "updated_at")
    readonly_fields = ("created_at", "updated_at")
    actions = ["export_csv"]
    change_list_template = "admin/documents/glossaryterm/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tag")

    @admin.display(description="Aliases")
    def alias_summary(self, term):
        return "; ".join(term.alias_list)

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_csv_view),
                name="documents_glossaryterm_import",
            ),
            *super().get_urls(),
        ]

    def import_csv_view(self, request):
        if not (self.has_add_permission(request) and self.has_change_permission(request)):
            raise PermissionDenied
        form = GlossaryImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            result = glossary_import(tenant_id=request.user.tenant_id, text=form.cleaned_data["file"])
            skipped = result["skipped"]
            self.message_user(
                request,
                f"Glossary imported: {result['created']} created, {result['updated']} updated, "
                f"{result['unchanged']} unchanged, {len(skipped)} skipped.",
                messages.WARNING if skipped else messages.SUCCESS,
            )
            for reason in skipped[:GLOSSARY_REPORT_LINES]:
                self.message_user(request, f"Skipped {reason}.", messages.WARNING)
            if len(skipped) > GLOSSARY_REPORT_LINES:
                self.message_user(
                    request, f"… and {len(skipped) - GLOSSARY_REPORT_LINES} more skipped lines.", messages.WARNING
                )
            return HttpResponseRedirect(reverse("admin:documents_glossaryterm_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Import glossary terms",
            "form": form,
            "columns": ", ".join(GLOSSARY_CSV_COLUMNS),
        }
        return TemplateResponse(request, "admin/documents/glossaryterm/import.html", context)

    @admin.action(description="Export selected terms as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(glossary_csv(queryset.select_related("tag")), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="glossary.csv"'
        return response
