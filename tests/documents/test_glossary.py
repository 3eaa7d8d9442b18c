"""The glossary in the Django admin (terms and aliases per tag, CSV import and export) and the
selector that gives a user the glossary of the tags they may read."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction
from django.test import Client

from documents import services
from documents.models import GlossaryTerm, Tag
from documents.selectors import glossary_entries_for
from ragchat.services.glossary import GlossaryEntry, expand_query

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/documents/glossaryterm/"
IMPORT = "/admin/documents/glossaryterm/import/"

CSV_TEXT = (
    "tag,term,aliases,note\n"
    "hr,PTO,paid time off; vacation,Days off with pay\n"
    "finance,VPN,virtual private network;remote access,\n"
    'Finance,expense report,"expense claim; reimbursement",\n'  # a tag may be named by its name
    "nosuchtag,WFH,work from home,\n"
    "hr,,orphan alias,\n"
    "\n"
    'hr,parental leave,"maternity leave;\npaternity leave",spans two lines\n'
    "acme-secret,ACME,acme alias,\n"
)


@pytest.fixture
def other_tenant_tag():
    tag = services.tag_create(tenant_id="acme", name="Acme secret")
    GlossaryTerm.objects.create(tag=tag, term="TPSreport", aliases="cover sheet")
    return tag


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def import_csv(client: Client, text: str, name: str = "glossary.csv"):
    upload = SimpleUploadedFile(name, text.encode("utf-8"), content_type="text/csv")
    return client.post(IMPORT, {"file": upload}, follow=True)


def export_csv(client: Client, ids) -> list[list[str]]:
    response = client.post(CHANGELIST, {"action": "export_csv", "_selected_action": [str(i) for i in ids]})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="glossary.csv"' in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(response.content.decode("utf-8"))))


def test_import_creates_terms_and_reports_skipped_lines(people, tags, other_tenant_tag):
    client = admin_client(people["admin"])
    page = client.get(IMPORT)
    assert page.status_code == 200 and b'type="file"' in page.content
    assert b"Import CSV" in client.get(CHANGELIST).content

    response = import_csv(client, CSV_TEXT)
    assert response.status_code == 200 and response.redirect_chain[-1][0] == CHANGELIST
    text = response.content.decode()
    assert "4 created, 0 updated, 0 unchanged, 3 skipped" in text
    assert "line 5: unknown tag &#x27;nosuchtag&#x27;" in text
    assert "line 6: no term" in text
    assert "line 10: unknown tag &#x27;acme-secret&#x27;" in text  # another tenant's tag is unknown here

    pto = GlossaryTerm.objects.get(tag=tags["hr"], term="PTO")
    assert pto.alias_list == ("paid time off", "vacation") and pto.note == "Days off with pay"
    assert pto.tenant_id == "default"
    assert GlossaryTerm.objects.get(term="expense report").tag == tags["finance"]
    leave = GlossaryTerm.objects.get(term="parental leave")
    assert leave.alias_list == ("maternity leave", "paternity leave")
    assert not GlossaryTerm.objects.filter(term__in=["WFH", "ACME"]).exists()
    assert GlossaryTerm.objects.filter(tenant_id="acme").count() == 1  # untouched


def test_import_is_idempotent_and_updates_existing_terms(people, tags):
    client = admin_client(people["admin"])
    import_csv(client, CSV_TEXT)
    before = {t.pk: (t.term, t.aliases, t.note, t.updated_at) for t in GlossaryTerm.objects.all()}

    again = import_csv(client, CSV_TEXT).content.decode()
    assert "0 created, 0 updated, 4 unchanged, 3 skipped" in again
    assert {t.pk: (t.term, t.aliases, t.note, t.updated_at) for t in GlossaryTerm.objects.all()} == before

    # Same term in another case: the existing one is updated, not duplicated; without a note
    # column the notes stay.
    changed = import_csv(client, "tag,term,aliases\nhr,pto,paid time off;vacation;holiday\n").content.decode()
    assert "0 created, 1 updated, 0 unchanged, 0 skipped" in changed
    pto = GlossaryTerm.objects.get(tag=tags["hr"], term__iexact="pto")
    assert pto.term == "pto" and pto.alias_list == ("paid time off", "vacation", "holiday")
    assert pto.note == "Days off with pay"
    assert GlossaryTerm.objects.filter(tenant_id="default").count() == 4


def test_import_refuses_a_file_without_the_columns(people, tags):
    client = admin_client(people["admin"])
    response = import_csv(client, "name,value\nPTO,vacation\n")
    assert response.status_code == 200 and response.redirect_chain == []
    assert "The first row must name the columns" in response.content.decode()
    response = client.post(IMPORT, {"file": SimpleUploadedFile("g.csv", b"\xff\xfe\x00bad")}, follow=True)
    assert "not UTF-8" in response.content.decode()
    assert not GlossaryTerm.objects.exists()


def test_export_import_round_trip(people, tags):
    client = admin_client(people["admin"])
    import_csv(client, CSV_TEXT)
    ids = list(GlossaryTerm.objects.values_list("pk", flat=True))
    rows = export_csv(client, ids)
    assert rows[0] == ["tag", "term", "aliases", "note"]
    assert rows[1:] == [
        ["finance", "expense report", "expense claim; reimbursement", ""],
        ["finance", "VPN", "virtual private network; remote access", ""],
        ["hr", "parental leave", "maternity leave; paternity leave", "spans two lines"],
        ["hr", "PTO", "paid time off; vacation", "Days off with pay"],
    ]
    exported = export_csv(client, ids)

    # Into an empty glossary: the same terms come back, and export the same file again.
    GlossaryTerm.objects.all().delete()
    text = "\n".join(",".join(f'"{c}"' for c in row) for row in exported) + "\n"
    assert "4 created, 0 updated, 0 unchanged, 0 skipped" in import_csv(client, text).content.decode()
    assert export_csv(client, GlossaryTerm.objects.values_list("pk", flat=True)) == exported
    # And over itself: nothing changes.
    assert "0 created, 0 updated, 4 unchanged, 0 skipped" in import_csv(client, text).content.decode()


def test_export_guards_formula_cells_and_import_reads_them_back(people, tags):
    # A cell a spreadsheet would run ("=HYPERLINK(...)", "+1", "@SUM") is exported with a leading
    # "'" (OWASP CSV injection); the import takes the "'" off again, so a round trip changes nothing.
    client = admin_client(people["admin"])
    hr = Tag.objects.get(slug="hr")
    term = GlossaryTerm.objects.create(
        tag=hr, term='=HYPERLINK("http://evil")', aliases="+1 line\n@SUM", note="-2 days"
    )
    rows = export_csv(client, [term.pk])
    assert rows[1] == ["hr", '\'=HYPERLINK("http://evil")', "'+1 line; @SUM", "'-2 days"]
    GlossaryTerm.objects.all().delete()
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    assert "1 created" in import_csv(client, buffer.getvalue()).content.decode()
    back = GlossaryTerm.objects.get()
    assert (back.term, back.alias_list, back.note) == ('=HYPERLINK("http://evil")', ("+1 line", "@SUM"), "-2 days")


def test_a_file_that_stops_being_csv_keeps_the_rows_before_and_names_the_line(people, tags):
    # A field longer than the csv module's limit (128 KiB) makes the rest of the file unreadable.
    client = admin_client(people["admin"])
    text = "tag,term,aliases\nhr,PTO,paid time off\nhr,WFH,work from home\nhr,huge," + "x" * 140_000 + "\n"
    page = import_csv(client, text).content.decode()
    assert "2 created" in page and "line 4: not CSV (field larger than field limit" in page
    assert "the rest of the file was not read" in page
    assert sorted(GlossaryTerm.objects.values_list("term", flat=True)) == ["PTO", "WFH"]


def test_admin_is_narrowed_to_the_admins_tenant(people, tags, other_tenant_tag, django_user_model):
    GlossaryTerm.objects.create(tag=tags["hr"], term="PTO", aliases="vacation")
    foreign = GlossaryTerm.objects.get(tenant_id="acme")
    client = admin_client(people["admin"])

    listing = client.get(CHANGELIST).content.decode()
    assert "PTO" in listing and "TPSreport" not in listing and "Acme secret" not in listing
    assert client.get(f"{CHANGELIST}{foreign.pk}/change/").status_code in (302, 404)
    add = client.get(f"{CHANGELIST}add/").content.decode()
    assert "Acme secret" not in add
    tag_choices = client.get(
        "/admin/autocomplete/",
        {"app_label": "documents", "model_name": "glossaryterm", "field_name": "tag", "term": ""},
    ).json()
    assert {r["text"] for r in tag_choices["results"]} == {"Finance", "HR", "Public"}

    # The add form accepts the admin's own tags only, and the term takes its tag's tenant.
    refused = client.post(f"{CHANGELIST}add/", {"tag": other_tenant_tag.pk, "term": "Sneaky", "aliases": ""})
    assert refused.status_code == 200 and not GlossaryTerm.objects.filter(term="Sneaky").exists()
    made = client.post(f"{CHANGELIST}add/", {"tag": tags["finance"].pk, "term": "CapEx", "aliases": "capital"})
    assert made.status_code == 302
    assert GlossaryTerm.objects.get(term="CapEx").tenant_id == "default"
    duplicate = client.post(f"{CHANGELIST}add/", {"tag": tags["finance"].pk, "term": "capex", "aliases": ""})
    assert duplicate.status_code == 200 and "already has this term" in duplicate.content.decode()

    # Exporting another tenant's term by id yields nothing of it.
    rows = export_csv(client, [foreign.pk])
    assert "TPSreport" not in str(rows)

    # The other tenant's admin sees their own term only, and imports into their own tags.
    acme_admin = django_user_model.objects.create_superuser("acmeroot", "a@acme.test", "pw-acme-123", tenant_id="acme")
    acme = admin_client(acme_admin)
    listing = acme.get(CHANGELIST).content.decode()
    assert "TPSreport" in listing and "PTO" not in listing
    assert "1 created" in import_csv(acme, "tag,term,aliases\nacme-secret,ACME,a\nhr,PTO,x\n").content.decode()
    assert GlossaryTerm.objects.get(term="ACME").tenant_id == "acme"
    assert GlossaryTerm.objects.get(tag=tags["hr"], term="PTO").aliases == "vacation"


def test_non_admins_cannot_import(people, tags):
    for role in ("owner", "member", "other_tenant"):
        client = admin_client(people[role])
        response = client.get(IMPORT)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role
        response = import_csv(client, CSV_TEXT)
        assert not GlossaryTerm.objects.exists(), role


def test_term_is_unique_per_tag_in_any_case(tags):
    GlossaryTerm.objects.create(tag=tags["hr"], term="PTO")
    GlossaryTerm.objects.create(tag=tags["finance"], term="PTO")  # another tag may have it too
    with pytest.raises(IntegrityError), transaction.atomic():
        GlossaryTerm.objects.create(tag=tags["hr"], term="pto")


def test_selector_returns_the_terms_of_readable_tags_only(people, tags, other_tenant_tag):
    GlossaryTerm.objects.create(tag=tags["hr"], term="PTO", aliases="paid time off; vacation")
    GlossaryTerm.objects.create(tag=tags["finance"], term="VPN", aliases="virtual private network\nremote access")
    GlossaryTerm.objects.create(tag=tags["public"], term="WFH", aliases="work from home")

    def terms(user):
        return [(e.tag, e.term) for e in glossary_entries_for(user=user)]

    # The finance member holds finance and public; HR is the admin's; acme is another tenant.
    assert terms(people["member"]) == [("finance", "VPN"), ("public", "WFH")]
    assert terms(people["owner"]) == [("finance", "VPN"), ("public", "WFH")]
    assert terms(people["outsider"]) == [("public", "WFH")]
    assert terms(people["admin"]) == [("finance", "VPN"), ("hr", "PTO"), ("public", "WFH")]
    assert terms(people["other_tenant"]) == []  # holds no acme tag yet, and never the default tenant's
    other_tenant_tag.members.add(people["other_tenant"])
    assert terms(people["other_tenant"]) == [("acme-secret", "TPSreport")]
    people["member"].is_active = False
    people["member"].save()
    assert terms(people["member"]) == []

    entries = glossary_entries_for(user=people["admin"])
    assert entries[0] == GlossaryEntry(term="VPN", aliases=("virtual private network", "remote access"), tag="finance")
    # What the lead wires in: the member's question is expanded with the glossary they may read.
    assert expand_query("Is the VPN or PTO needed?", glossary_entries_for(user=people["outsider"])) == (
        "Is the VPN or PTO needed?",
        [],
    )
    assert expand_query("Can I WFH?", glossary_entries_for(user=people["outsider"])) == (
        "Can I WFH? (work from home)",
        ["WFH"],
    )
