from django import forms

from documents.models import Tag


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


class KnowledgeEditForm(forms.Form):
    """The owner's new text of a verified answer (re-published and verified by them)."""

    question = forms.CharField(max_length=2_000, strip=True, widget=forms.TextInput())
    answer = forms.CharField(max_length=20_000, strip=True, widget=forms.Textarea(attrs={"rows": 7}))
