from django.contrib import admin

from access.admin import TenantScopedAdmin
from routing.models import QuestionGroup, RoutedQuestion


@admin.register(RoutedQuestion)
class RoutedQuestionAdmin(TenantScopedAdmin):
    list_display = (
        "question_short",
        "asker",
        "tag",
        "target",
        "fallback",
        "origin",
        "status",
        "created_at",
        "answered_at",
    )
    list_filter = ("status", "origin", "fallback", ("tag", admin.RelatedOnlyFieldListFilter))
    search_fields = ("question", "answer", "asker__username", "asker__email")
    date_hierarchy = "created_at"
    raw_id_fields = ("asker", "session", "message", "question_message", "answer_message", "group", "published_document")
    readonly_fields = ("created_at",)
    list_select_related = ("asker", "tag", "target")

    @admin.display(description="Question")
    def question_short(self, obj):
        return obj.question[:80]


class RoutedQuestionInline(admin.TabularInline):
    model = RoutedQuestion
    fields = ("question", "asker", "status", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(QuestionGroup)
class QuestionGroupAdmin(TenantScopedAdmin):
    list_display = ("representative_query", "tag", "status", "created_at", "answered_at")
    list_filter = ("status", ("tag", admin.RelatedOnlyFieldListFilter))
    search_fields = ("representative_query",)
    exclude = ("embedding",)
    inlines = [RoutedQuestionInline]
