"""A small fictional-company corpus (Brightwater Tools Ltd.) the project writes itself, in several
formats: an employee handbook (DOCX), IT documents (PDF, Markdown), finance documents (PDF, HTML)
and a plain-text holiday notice. Generated with fpdf2 and python-docx at the moment it is needed."""

from __future__ import annotations

import datetime as dt
import html
import io
from dataclasses import dataclass

COMPANY = "Brightwater Tools Ltd."


@dataclass(frozen=True)
class DemoFile:
    filename: str
    tags: tuple[str, ...]  # slugs
    data: bytes


HANDBOOK = [
    (
        "Welcome",
        [
            f"Welcome to {COMPANY}. We design and build hand tools for professional carpenters in our workshop in Leeds "
            "and sell them through partners in twelve countries.",
            "This handbook explains how we work together. Ask your manager or the People team when something is unclear.",
        ],
    ),
    (
        "Working hours",
        [
            "Core hours are 10:00 to 15:00, Monday to Friday. Outside core hours you choose when you work, "
            "as long as your team knows how to reach you.",
            "Employees may work from home up to three days per week. The workshop team agrees remote days with the shift lead.",
        ],
    ),
    (
        "Holidays and leave",
        [
            "Every full-time employee has 28 days of paid holiday per year plus public holidays. "
            "Up to five unused days can be carried over to the next year; they expire on 31 March.",
            "Request holidays in the HR portal at least two weeks in advance. Sick leave is reported to your manager "
            "before 09:30 on the first day; from the fourth day we need a doctor's note.",
            "Parents receive 20 weeks of paid parental leave, regardless of gender.",
        ],
    ),
    (
        "Learning budget",
        [
            "Each employee has a personal learning budget of 1,200 GBP per year for courses, books and conferences. "
            "Your manager approves requests in the HR portal.",
        ],
    ),
    (
        "Code of conduct",
        [
            "We treat colleagues, partners and customers with respect. Report harassment or discrimination to the People "
            "team or anonymously through the ethics hotline; reports are investigated within ten working days.",
        ],
    ),
]

IT_SECURITY_PAGES = [
    (
        "Passwords and sign-in",
        "Passwords must have at least 14 characters. Use the company password manager (Bitwarden) "
        "for every work account. Multi-factor authentication is mandatory for email, the VPN and the HR portal; use the "
        "authenticator app, not SMS. Never share a password, not even with the IT helpdesk - we will never ask for it.",
    ),
    (
        "Devices",
        "Company laptops are encrypted with full-disk encryption and receive updates automatically every "
        "Tuesday night. Lock your screen when you leave your desk (Windows key + L or Ctrl + Cmd + Q). "
        "A lost or stolen laptop must be reported to the IT helpdesk within one hour, day or night, on +44 113 496 0555.",
    ),
    (
        "Phishing and incidents",
        "Forward suspicious emails to phishing@brightwater.example and delete them. "
        "If you clicked a suspicious link or opened an attachment, disconnect from the network and call the helpdesk "
        "immediately. Security incidents are handled by the IT security lead, who informs the management within 24 hours.",
    ),
]

IT_FAQ = """# IT helpdesk FAQ

## How do I reach the helpdesk?

Open a ticket at helpdesk.brightwater.example or call extension 555. The helpdesk is staffed from 08:00 to 18:00 on
working days; outside these hours, call the on-call number for emergencies only.

## How often are laptops replaced?

Laptops are replaced every four years, or earlier when a repair would cost more than half of a new device.
Developers and designers can request 32 GB of memory.

## How do I connect to the VPN?

Install WireGuard from the Software Center, import the profile from the IT portal and sign in with multi-factor
authentication. The VPN is required for the ERP system and the file server, not for email.

## Can I use my own phone for work email?

Yes, if the phone has a screen lock and the Outlook app is installed through the company portal. The IT team can wipe
the work profile remotely, never your personal data.
"""

EXPENSE_PAGES = [
    (
        "Expense claims",
        "Submit expense claims in the finance portal within 30 days of the expense, with a photo of "
        "each receipt. Claims are reimbursed with the next monthly payroll. Claims above 500 GBP need approval by your "
        "manager before the expense is made.",
    ),
    (
        "Travel",
        "Book train travel in standard class; first class is allowed for journeys longer than three hours. "
        "Flights are booked through the travel desk in economy class. The hotel limit is 140 GBP per night in London and "
        "110 GBP elsewhere in the UK. The daily meal allowance is 35 GBP.",
    ),
    (
        "Company cards",
        "Managers receive a company credit card with a monthly limit of 2,000 GBP. Card statements are "
        "reconciled in the finance portal by the 5th of the following month. Personal purchases on a company card are "
        "not allowed.",
    ),
]

PURCHASING = [
    (
        "Purchasing rules",
        [
            "Purchases up to 1,000 GBP can be ordered directly by any budget holder.",
            "Purchases between 1,000 and 10,000 GBP need two quotes and approval by the head of the department.",
            "Purchases above 10,000 GBP need three quotes and approval by the finance director.",
        ],
    ),
    (
        "Invoices and payment terms",
        [
            "Suppliers send invoices to invoices@brightwater.example. We pay approved invoices within 30 days.",
            "The fiscal year runs from 1 April to 31 March; the budget for the next year is agreed in February.",
        ],
    ),
]

HOLIDAY_NOTICE = f"""Office closure over the holidays - {COMPANY}

The office and the workshop are closed from 24 December to 1 January. The IT helpdesk runs an emergency line during
the closure; the finance team processes the last payroll of the year on 20 December.

The summer company day takes place on the second Friday of July at Roundhay Park. Families are welcome.
"""


def _pdf(title: str, pages: list[tuple[str, str]]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(dt.datetime(2026, 1, 5, tzinfo=dt.UTC))  # same bytes every run
    pdf.set_title(title)
    pdf.set_author(COMPANY)
    for heading, text in pages:
        pdf.add_page()
        pdf.start_section(heading)
        pdf.set_font("helvetica", style="B", size=14)
        pdf.multi_cell(0, 8, heading)
        pdf.ln(2)
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def _docx(title: str, sections: list[tuple[str, list[str]]]) -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading(title, level=0)
    for heading, paragraphs in sections:
        document.add_heading(heading, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _html(title: str, sections: list[tuple[str, list[str]]]) -> bytes:
    body = "".join(f"<h2>{html.escape(h)}</h2>" + "".join(f"<p>{html.escape(p)}</p>" for p in ps) for h, ps in sections)
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><nav><a href='/'>Intranet</a></nav><main><h1>{html.escape(title)}</h1>{body}</main>"
        "<footer>Finance team</footer></body></html>"
    ).encode()


def demo_files() -> list[DemoFile]:
    return [
        DemoFile("employee-handbook.docx", ("handbook", "public"), _docx(f"{COMPANY} employee handbook", HANDBOOK)),
        DemoFile("holiday-closure.txt", ("public",), HOLIDAY_NOTICE.encode("utf-8")),
        DemoFile("it-security-policy.pdf", ("it",), _pdf("IT security policy", IT_SECURITY_PAGES)),
        DemoFile("it-helpdesk-faq.md", ("it",), IT_FAQ.encode("utf-8")),
        DemoFile("expense-and-travel-policy.pdf", ("finance",), _pdf("Expense and travel policy", EXPENSE_PAGES)),
        DemoFile("purchasing-and-invoices.html", ("finance",), _html("Purchasing and invoices", PURCHASING)),
    ]
