from django import forms

from documents.models import Document, Tag


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern); size checks happen in services."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(label="Files", help_text="PDF, Word (.docx), HTML, Markdown or plain text.")
    tags = forms.ModelMultipleChoiceField(
        queryset=Tag.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may read these documents.",
    )

    def __init__(self, *args, tag_choices=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tags"].queryset = tag_choices if tag_choices is not None else Tag.objects.none()


class ReplaceForm(forms.Form):
    file = forms.FileField(label="New version")


class FilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Title")
    tag = forms.SlugField(required=False, max_length=100)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Document.Status.choices])
    kind = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any type"),
            ("pdf", "PDF"),
            ("docx", "Word"),
            ("html", "HTML"),
            ("markdown", "Markdown"),
            ("text", "Text"),
        ],
    )
