"""Numbers from a request that reach a query stay within the database's integers.

Django's `int` URL converter, `str.isdigit()` and a form's choice of rows accept any number of
digits; a number beyond the column's range does not fit SQLite's 64-bit INTEGER (OverflowError) or
PostgreSQL's bigint (NumericValueOutOfRange), and the request failed with a server error instead of
a refusal. Each way a number comes in is bounded here, once:

- URLs: the `id` converter (registered by ragchat.apps) matches ids of the BigAutoField range only;
  a longer one is no address (404), like any other unknown id. `<int:…>` is not used.
- Websocket messages and form values read by hand: `request_int()` (ASCII digits within a range, or
  None: the caller refuses it as it refuses any other bad value).
- Forms choosing rows by id: `BoundedModelMultipleChoiceField` checks each id against the key
  field's own range before the `IN (…)` query (the single-row `ModelChoiceField` needs no bound: its
  `=` lookup treats an out-of-range id as no row).
- The admin (access.admin.TenantScopedMixin, every model admin): `BoundedChangeList` refuses
  `?field__in=…` values outside their field's range as Django refuses any other bad lookup; its
  forms' many-to-many fields are bounded choices and its autocompletes leave such ids out.
- The API: its schemas bound every number with `ID_MAX` / `COUNT_MAX` (api.endpoints).
"""

from __future__ import annotations

from django import forms
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.admin.views.main import ChangeList
from django.contrib.admin.widgets import AutocompleteSelect, AutocompleteSelectMultiple
from django.core.exceptions import ValidationError
from django.db import models

ID_MAX = 2**63 - 1  # BigAutoField, on SQLite (INTEGER) and PostgreSQL (bigint) alike
COUNT_MAX = 2**31 - 1  # page numbers and counts: PostgreSQL's integer; times a page size it fits bigint


def request_int(raw: object, *, minimum: int = 0, maximum: int = ID_MAX) -> int | None:
    """`raw` as an int if it is ASCII digits within [minimum, maximum], else None (`"²".isdigit()`
    is true but int("²") fails; "1" followed by 30 zeros is digits but no row's id)."""
    text = str(raw)
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(maximum)):
        return None
    value = int(text)
    return value if minimum <= value <= maximum else None


class IdConverter:
    """`<id:name>`: a positive id of the BigAutoField range (Django's `int` takes any length)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > ID_MAX:
            raise ValueError("beyond the id range")  # the URL does not match: 404
        return number

    def to_url(self, value) -> str:
        return str(int(value))


def _field_problem(field: models.Field, raw: object) -> bool:
    try:
        field.run_validators(field.to_python(raw))
    except ValidationError:
        return True
    return False


class BoundedModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """A choice of rows whose ids are checked against the key field's range (the database's own:
    `connection.ops.integer_field_range`) before they reach the query."""

    def _check_values(self, value):
        meta = self.queryset.model._meta
        field = meta.get_field(self.to_field_name) if self.to_field_name else meta.pk
        for pk in value or ():
            if _field_problem(field, pk):
                raise ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super()._check_values(value)


class _BoundedAutocomplete:
    """An admin autocomplete looks the submitted ids up to show them again (`IN (…)`), also when the
    form refuses them: an id out of its column's range is left out of that query."""

    def optgroups(self, name, value, attr=None):
        target = self.field.target_field
        return super().optgroups(name, [v for v in value if v in ("", None) or not _field_problem(target, v)], attr)


class BoundedAutocompleteSelect(_BoundedAutocomplete, AutocompleteSelect):
    pass


class BoundedAutocompleteSelectMultiple(_BoundedAutocomplete, AutocompleteSelectMultiple):
    pass


def _lookup_field(model, key: str) -> models.Field | None:
    """The field a lookup such as `tag__owner__id__in` compares with (a relation: its target's key)."""
    path = key.split("__")
    while path:
        try:
            *head, last = path
            owner = get_fields_from_path(model, "__".join(head))[-1].related_model if head else model
            field = owner._meta.pk if last == "pk" else get_fields_from_path(model, "__".join(path))[-1]
            return getattr(field, "target_field", None) if field.is_relation else field
        except Exception:  # not a field (a lookup name) or a path Django resolves differently
            path = path[:-1]
    return None


class BoundedChangeList(ChangeList):
    """The admin's list (access.admin.TenantScopedMixin) for every model of the admin site."""

    def get_queryset(self, request, exclude_parameters=None):
        # `=`, `<` and `>` lookups treat an out-of-range number as no row; `__in` and `__range`
        # pass it to the database.
        for key, values in self.get_filters_params().items():
            if not key.endswith(("__in", "__range")):
                continue
            field = _lookup_field(self.model, key)
            if not isinstance(field, models.IntegerField):
                continue
            for value in values if isinstance(values, list) else [values]:
                if any(_field_problem(field, v) for v in str(value).split(",") if v):
                    raise IncorrectLookupParameters(f"{key}: a number out of range")
        return super().get_queryset(request, exclude_parameters)
