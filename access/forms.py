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

    def __init__(self, *args, **kwargs):
        from access.models import AuditEvent

        super().__init__(*args, **kwargs)
        self.fields["action"].choices = [("", "All actions"), *AuditEvent.Action.choices]
