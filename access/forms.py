from django import forms

from access import policy


class ViewAsForm(forms.Form):
    user = forms.ModelChoiceField(queryset=None, label="Person", empty_label="Choose a person")
    question = forms.CharField(
        label="Question",
        max_length=2000,
        min_length=3,
        widget=forms.TextInput(attrs={"placeholder": "e.g. What is the travel policy?"}),
    )

    def __init__(self, *args, admin, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = policy.tenant_users(user=admin)
        self.fields["user"].label_from_instance = lambda u: (
            f"{u.get_full_name()} ({u.get_username()})" if u.get_full_name() else u.get_username()
        )


class AuditFilterForm(forms.Form):
    action = forms.ChoiceField(required=False, label="Action")
    person = forms.CharField(
        required=False,
        max_length=150,
        label="Person",
        widget=forms.TextInput(attrs={"placeholder": "username or name", "type": "search"}),
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("“From” is after “To”.")
        return data

    def __init__(self, *args, **kwargs):
        from access.models import AuditEvent

        super().__init__(*args, **kwargs)
        self.fields["action"].choices = [("", "All actions"), *AuditEvent.Action.choices]
