from django import forms

from documents.models import Document, Tag
from documents.services import MSG_NO_TAG
from ragchat.bounds import BoundedModelMultipleChoiceField


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern). Each file is checked on its own by
    documents.services (size, emptiness, type), so one bad file does not refuse the others."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = [f for f in (data if isinstance(data, (list, tuple)) else [data]) if f]
        if not files and self.required:
            raise forms.ValidationError(self.error_messages["required"], code="required")
        return files


MSG_TAG_NOT_ALLOWED = "You may not upload to one of the chosen tags."


class UploadForm(forms.Form):
    files = MultipleFileField(
        label="Files",
        help_text=(
            "PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), CSV, OpenDocument (.odt, .ods, .odp), RTF, "
            "email (.eml), HTML, Markdown or plain text."
        ),
        error_messages={"required": "Choose at least one file to upload."},
    )
    tags = BoundedModelMultipleChoiceField(
        queryset=Tag.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may read these documents.",
        error_messages={
            "required": MSG_NO_TAG,
            "invalid_choice": MSG_TAG_NOT_ALLOWED,
            "invalid_pk_value": MSG_TAG_NOT_ALLOWED,
        },
    )

    def __init__(self, *args, tag_choices=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tags"].queryset = tag_choices if tag_choices is not None else Tag.objects.none()

    def problems(self) -> list[str]:
        """The errors as the uploader reads them, on the web page and from the API: the fields'
        own messages say what to do; field names are not shown."""
        return [" ".join(errors) for errors in self.errors.values()]


class ReplaceForm(forms.Form):
    file = forms.FileField(label="New version")


class FilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Title")
    source = forms.ChoiceField(required=False, choices=[("", "Any source"), *Document.Source.choices])
    tag = forms.SlugField(required=False, max_length=100)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Document.Status.choices])
    kind = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any type"),
            ("pdf", "PDF"),
            ("docx", "Word"),
            ("pptx", "PowerPoint"),
            ("xlsx", "Excel"),
            ("csv", "CSV"),
            ("odt", "OpenDocument text"),
            ("ods", "OpenDocument spreadsheet"),
            ("odp", "OpenDocument presentation"),
            ("rtf", "RTF"),
            ("eml", "Email"),
            ("html", "HTML"),
            ("markdown", "Markdown"),
            ("text", "Text"),
        ],
    )


class SiteForm(forms.Form):
    """A website import; documents.sites.site_create validates the URLs, domains and limits."""

    name = forms.CharField(max_length=200, required=False, label="Name")
    tag = forms.ModelChoiceField(queryset=Tag.objects.none(), label="Tag", help_text="Who may read the pages.")
    start_urls = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), label="Start URLs", help_text="One a line.")
    allowed_domains = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label="Allowed domains",
        help_text="One a line; subdomains included. Empty: the start URLs' hosts.",
    )
    max_pages = forms.IntegerField(min_value=1, initial=100, label="Max pages")
    max_depth = forms.IntegerField(min_value=0, max_value=20, initial=3, label="Max depth")
    include_patterns = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, label="Only paths", help_text="e.g. /docs/*"
    )
    exclude_patterns = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, label="Skip paths", help_text="e.g. /blog/*"
    )
    recrawl_hours = forms.TypedChoiceField(
        coerce=int,
        initial=24,
        label="Re-crawl",
        choices=[(0, "Only by hand"), (6, "Every 6 hours"), (24, "Daily"), (168, "Weekly")],
    )

    def __init__(self, *args, tag_choices=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tag"].queryset = tag_choices if tag_choices is not None else Tag.objects.none()
