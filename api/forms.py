from django import forms

from api.models import AccessToken
from api.services import NAME_MISSING, SCOPE_MISSING

EXPIRY_CHOICES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year"), (0, "Never")]


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Name",
        help_text="What uses it, e.g. “Slack bot”.",
        error_messages={"required": NAME_MISSING},
    )
    scopes = forms.MultipleChoiceField(
        choices=AccessToken.Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        label="Scopes",
        help_text="What it may do, as you: it never reaches more than you can.",
        error_messages={"required": SCOPE_MISSING},
    )
    expires_in_days = forms.TypedChoiceField(coerce=int, choices=EXPIRY_CHOICES, initial=90, label="Expires in")
