from django import forms

from documents.models import Tag
from routing.models import NotificationPreference


class AnswerForm(forms.Form):
    answer = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 7, "placeholder": "Write the answer the asker will receive…"}),
        max_length=20_000,
        strip=True,
    )
    publish = forms.BooleanField(
        required=False,
        label="Publish as verified knowledge",
        help_text="The question and your answer become a document on this tag: the assistant will cite it next time.",
    )
    publish_tag = forms.ModelChoiceField(queryset=Tag.objects.none(), required=False, label="Publish under tag")

    def __init__(self, *args, publish_tags=None, **kwargs):
        super().__init__(*args, **kwargs)
        if publish_tags is None:
            del self.fields["publish_tag"]
        else:
            self.fields["publish_tag"].queryset = publish_tags

    def clean(self):
        data = super().clean()
        if data.get("publish") and "publish_tag" in self.fields and not data.get("publish_tag"):
            self.add_error("publish_tag", "Choose the tag to publish this answer under.")
        return data


class NotificationPreferenceForm(forms.ModelForm):
    """What a person receives by email. The inbox switches (new questions, review items, reminders)
    are offered only to people with an inbox; the others keep their saved values."""

    INBOX_FIELDS = ("email_questions", "email_reviews", "email_reminders")

    class Meta:
        model = NotificationPreference
        fields = ["email_questions", "email_reviews", "email_reminders", "email_answers", "digest"]
        labels = {
            "email_questions": "New questions routed to me",
            "email_reviews": "Review items: down-voted answers, verified answers that need review",
            "email_reminders": "Reminders when an item waits longer than its target time",
            "email_answers": "Answers and corrections to my questions",
            "digest": "Daily digest",
        }
        help_texts = {
            "email_questions": "When the assistant could not answer with confidence, or someone asked you directly.",
            "email_reviews": "When someone down-votes an answer on your tags, or a verified answer needs review.",
            "email_reminders": "At most once per target period while an item waits.",
            "email_answers": "When a tag owner answers or corrects a question you sent.",
            "digest": "One email a day with everything waiting in your inbox; none when nothing waits.",
        }
        widgets = {"digest": forms.RadioSelect}

    def __init__(self, *args, has_inbox: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not has_inbox:
            for name in (*self.INBOX_FIELDS, "digest"):
                del self.fields[name]


class KnowledgeEditForm(forms.Form):
    """The owner's new text of a verified answer (re-published and verified by them)."""

    question = forms.CharField(max_length=2_000, strip=True, widget=forms.TextInput())
    answer = forms.CharField(max_length=20_000, strip=True, widget=forms.Textarea(attrs={"rows": 7}))


class ReportPeriodForm(forms.Form):
    """The report's period: the last 7, 30 or 90 days, or the days from `start` to `end` (both
    included). Bad input is told and the last 30 days shown instead."""

    PRESETS = {"7d": 7, "30d": 30, "90d": 90}
    MAX_DAYS = 366

    period = forms.ChoiceField(
        choices=[("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days"), ("custom", "Custom")], required=False
    )
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("period") != "custom":
            return data
        start, end = data.get("start"), data.get("end")
        if start is None or end is None:
            raise forms.ValidationError("Choose both dates of a custom period.")
        from django.utils import timezone

        if start > timezone.localdate():
            raise forms.ValidationError("The period cannot start in the future.")
        if start > end:
            raise forms.ValidationError("The period must start before it ends.")
        if (end - start).days + 1 > self.MAX_DAYS:
            raise forms.ValidationError(f"A period covers at most {self.MAX_DAYS} days.")
        return data

    def bounds(self, *, now):
        """(since, until, key) of the chosen period; the last 30 days when the input is invalid."""
        from datetime import datetime, time, timedelta

        from django.utils import timezone

        data = self.cleaned_data if self.is_valid() else {}
        if data.get("period") == "custom":
            tz = timezone.get_current_timezone()
            since = datetime.combine(data["start"], time.min, tzinfo=tz)
            until = datetime.combine(data["end"] + timedelta(days=1), time.min, tzinfo=tz)
            return since, min(until, now), "custom"
        key = data.get("period") or "30d"
        return now - timedelta(days=self.PRESETS[key]), now, key
