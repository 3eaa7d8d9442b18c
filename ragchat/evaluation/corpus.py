"""The evaluation corpus the project writes itself: 25 documents of a fictional company (Halvorsen
Maritime) in six tags, every supported format, one subfolder per tag, plus 60+ gold questions.

    write_corpus(folder) -> (folder, questions_path)

The top-level subfolder of a file is its tag (hr/, it/, finance/, legal/, security/, public/), the
rule `manage.py evaluate` applies to any folder. Facts are distinctive on purpose (codes, names,
numbers that occur in one document only), so that every gold question has one unambiguous set of
relevant documents and a support phrase that only a chunk holding the answer contains.

Gold question fields (JSONL): `question`; `relevant_documents` (paths relative to the folder);
`support_phrases` (a retrieved chunk must contain one, case-insensitive); optional `tags` (the
asker's tags; default: every tag of the corpus); optional `history` (earlier user questions of the
conversation, oldest first: the evaluator turns them into the follow-up's retrieval query with the
core's build_retrieval_query, as the chat does); optional `standalone` (for a question with a
history: the same question rewritten by a person to stand alone, the ceiling a follow-up strategy
aims at); `kind` (fact, acronym, name, code, follow-up, topic-switch, multi) for per-kind
breakdowns. A topic-switch question has a history about something else and must be searched as
asked.

Files are rendered with the generators in ragchat/evaluation/docgen.py (fpdf2, python-docx, plain HTML,
Markdown, text): the same ones the parser tests use, so nothing binary is committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

Section = tuple[str, list[str]]


@dataclass(frozen=True)
class EvalDocument:
    path: str  # relative, "<tag>/<name>.<ext>"; the extension decides the format
    title: str
    sections: list[Section]
    # Tables by name, rows of cells, the first row the header: after the section of that heading
    # (a section of their own when none has it), a slide of their own, a sheet of their own.
    tables: dict[str, list[list[str]]] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return self.path.split("/", 1)[0]


@dataclass(frozen=True)
class GoldQuestion:
    question: str
    relevant_documents: list[str]
    support_phrases: list[str]
    kind: str = "fact"
    history: list[str] = field(default_factory=list)
    tags: list[str] | None = None
    standalone: str = ""

    def as_dict(self) -> dict:
        out: dict = {
            "question": self.question,
            "relevant_documents": self.relevant_documents,
            "support_phrases": self.support_phrases,
            "kind": self.kind,
        }
        if self.history:
            out["history"] = self.history
        if self.standalone:
            out["standalone"] = self.standalone
        if self.tags is not None:
            out["tags"] = self.tags
        return out


# ------------------------------------------------------------------------------------ documents

DOCUMENTS: list[EvalDocument] = [
    # ---------------------------------------------------------------- HR
    EvalDocument(
        "hr/employee-handbook.pdf",
        "Employee Handbook 2025",
        [
            (
                "Annual leave",
                [
                    "Full-time employees receive 28 days of paid annual leave per calendar year, in addition to public holidays. "
                    "Part-time employees receive leave pro rata to their contracted hours.",
                    "Unused leave may be carried over up to a maximum of 5 days; carried-over days must be taken before 31 March "
                    "of the following year or they expire. Leave is requested in the HR portal and approved by the line manager.",
                ],
            ),
            (
                "Probation and working hours",
                [
                    "Every new contract starts with a probation period of six months, during which either side may end the "
                    "employment with two weeks' notice.",
                    "We work flexible hours around core hours from 10:00 to 15:00, Monday to Friday. Overtime must be agreed "
                    "with the manager in advance and is compensated as time off in lieu.",
                ],
            ),
            (
                "Sick leave",
                [
                    "If you are ill, notify your manager before 09:30 on the first day of absence. A doctor's note is required "
                    "from the fourth calendar day of sickness onwards.",
                    "The handbook is owned by Ingrid Solberg, Head of People, who answers questions about its interpretation.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "hr/parental-leave-policy.docx",
        "Parental Leave Policy",
        [
            (
                "Entitlement",
                [
                    "The birth parent is entitled to 20 weeks of fully paid parental leave. The second parent, including "
                    "adoptive parents and partners in same-sex couples, is entitled to 12 weeks of fully paid leave.",
                    "Leave may be taken in up to three blocks within the first 24 months after the birth or adoption.",
                ],
            ),
            (
                "The Kinderbonus",
                [
                    "In addition to paid leave, each new parent receives a one-off Kinderbonus of 1,500 EUR paid with the next "
                    "salary run after the birth or adoption certificate is submitted.",
                ],
            ),
            (
                "How to apply",
                [
                    "Submit form HR-PL-22 at least eight weeks before the planned start of leave. The form goes to your manager "
                    "and to the People team, who confirm the dates in writing within ten working days.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "hr/remote-work-guidelines.md",
        "Remote Work Guidelines",
        [
            (
                "How much remote work",
                [
                    "Employees may work remotely up to three days per week, provided their role allows it and the team keeps "
                    "at least one shared office day, usually Tuesday.",
                ],
            ),
            (
                "Home office allowance",
                [
                    "Everyone with an approved remote arrangement receives a home office allowance of 45 EUR per month with "
                    "salary, to cover electricity, internet and furniture wear.",
                ],
            ),
            (
                "Workations",
                [
                    "Working from abroad (a workation) is allowed for at most 30 days per calendar year and only inside the "
                    "EU/EEA, for tax and insurance reasons. Every remote arrangement and workation is registered and approved "
                    "in the FlexDesk portal before it starts.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "hr/performance-review-process.html",
        "Performance Review Process",
        [
            (
                "The Compass cycle",
                [
                    "Our annual performance review cycle is called Compass and runs every November. Employees write a "
                    "self-assessment, managers collect 360-degree feedback from three peers, and a calibration committee "
                    "of department heads reviews ratings for consistency.",
                ],
            ),
            (
                "Rating scale",
                [
                    "Compass uses a five-point scale: 1 Below expectations, 2 Partly meets, 3 Meets expectations, "
                    "4 Exceeds expectations, 5 Outstanding.",
                ],
            ),
            (
                "Pay outcomes",
                [
                    "Salary adjustments that result from Compass take effect on 1 April of the following year and are "
                    "communicated by the manager in a one-to-one meeting in March.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "hr/onboarding-checklist.txt",
        "Onboarding Checklist for New Starters",
        [
            (
                "Your first day",
                [
                    "Come to the reception of Building C at 09:00 on your first day. Your buddy meets you there and takes you "
                    "to the IT Bar, where your laptop and badge are ready.",
                ],
            ),
            (
                "First two weeks",
                [
                    "Complete the mandatory safety and compliance course SAFE-101 within 14 days of your start date. "
                    "Book a meeting with your mentor, who is assigned by our onboarding coordinator Priya Raman.",
                ],
            ),
            (
                "First three months",
                [
                    "Agree your objectives with your manager in the first month and hold a probation check-in after three "
                    "months.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- IT
    EvalDocument(
        "it/vpn-setup-guide.pdf",
        "VPN Setup Guide",
        [
            (
                "Installing the client",
                [
                    "Remote access uses the WireGuard VPN client. Download your personal profile from the portal at "
                    "vpn.halvorsen.example and import it into the client; the profile connects to gateway GW-OSL-02 in Oslo.",
                    "Sign-in requires multi-factor authentication with the HalvoKey app on your phone. Split tunnelling is "
                    "disabled: all traffic goes through the VPN while it is connected.",
                ],
            ),
            (
                "Troubleshooting",
                [
                    "Error VPN-809 means your device certificate has expired; renew it from the portal under My Devices and "
                    "reconnect. Error VPN-412 means the gateway is in maintenance; wait fifteen minutes and try again.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "it/password-policy.docx",
        "Password Policy",
        [
            (
                "Requirements",
                [
                    "Passwords must be at least 14 characters long. We recommend passphrases of four or more random words. "
                    "Passwords are not rotated on a schedule; change yours immediately if you suspect it is compromised.",
                ],
            ),
            (
                "Lockout",
                [
                    "An account is locked for 15 minutes after 8 failed sign-in attempts. The service desk can unlock it "
                    "earlier after verifying your identity.",
                ],
            ),
            (
                "Password manager and service accounts",
                [
                    "Store every work password in the company Bitwarden vault. Service account credentials are rotated "
                    "every 90 days by their technical owner and never stored in source code.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "it/laptop-replacement.md",
        "Laptop Replacement Standard",
        [
            (
                "Replacement cycle",
                [
                    "Company laptops are replaced every four years (48 months) from the delivery date, or earlier if a repair "
                    "would cost more than half of a new device.",
                ],
            ),
            (
                "Standard models",
                [
                    "The standard model is the ThinkPad T14 Gen 5 with 32 GB of memory. Software developers may choose a "
                    "MacBook Pro 14 instead.",
                ],
            ),
            (
                "Requesting and returning",
                [
                    "Request a replacement through a service desk ticket in category HW-REQ. Returned devices are wiped by "
                    "our recycling partner Certus, who issues a wipe certificate for each serial number.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "it/service-desk-sla.html",
        "IT Service Desk Service Levels",
        [
            (
                "Contacting the service desk",
                [
                    "The IT service desk, Helix Desk, is reachable on internal extension 4357 (HELP) and through the portal. "
                    "Staffed hours are 07:00 to 19:00 CET on working days.",
                ],
            ),
            (
                "Priorities and response times",
                [
                    "P1 (critical, many users affected): response within 15 minutes and resolution target of 4 hours. "
                    "P2 (high): response within 1 hour. P3 (normal): response by the next business day.",
                    "Outside staffed hours, P1 incidents page the on-call engineer through OpsGenie.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "it/backup-and-restore.txt",
        "Backup and Restore Procedure",
        [
            (
                "Backups",
                [
                    "All servers are backed up nightly at 01:30 to the secondary data centre Vault-B in Bergen. "
                    "Backups are kept for 35 days.",
                ],
            ),
            (
                "Restore",
                [
                    "To restore a file or a system, open a ticket of type RST with the path and the date you need. "
                    "Our recovery point objective (RPO) is 24 hours and our recovery time objective (RTO) is 8 hours.",
                ],
            ),
            (
                "Testing",
                [
                    "The infrastructure team runs a full restore test every quarter and records the result in the "
                    "change calendar.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- finance
    EvalDocument(
        "finance/travel-expense-policy.pdf",
        "Travel and Expense Policy",
        [
            (
                "Per diem",
                [
                    "Business travellers receive a per diem of 65 EUR per day for domestic trips and 90 EUR per day abroad, "
                    "covering meals and small expenses.",
                ],
            ),
            (
                "Hotels and flights",
                [
                    "Hotel costs are capped at 180 EUR per night, or 220 EUR per night in Oslo and London. Book economy class "
                    "for flights under six hours; business class needs approval from a vice president.",
                ],
            ),
            (
                "Submitting claims",
                [
                    "Submit expense claims in Spendwise within 30 days of the trip. Attach receipts for every item above "
                    "25 EUR; claims without receipts are returned.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "finance/procurement-rules.docx",
        "Procurement Rules",
        [
            (
                "Purchase orders",
                [
                    "Every purchase above 5,000 EUR requires a purchase order raised before the goods or services are "
                    "ordered. Purchases above 25,000 EUR require three written quotes.",
                ],
            ),
            (
                "Approvals",
                [
                    "Purchases above 100,000 EUR are approved by the Chief Financial Officer, Marcus Lindqvist.",
                ],
            ),
            (
                "Suppliers",
                [
                    "Buy from the Approved Supplier List (ASL) whenever possible. Adding a supplier to the ASL requires a "
                    "risk check by the procurement team.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "finance/corporate-card-guide.md",
        "Corporate Card Guide",
        [
            (
                "The LumenCard",
                [
                    "Employees who travel often receive a LumenCard corporate credit card with a monthly limit of 3,000 EUR. "
                    "Personal use of the card is not allowed.",
                ],
            ),
            (
                "Cash and reconciliation",
                [
                    "Cash withdrawals are limited to 200 EUR per month. Reconcile every card transaction in Spendwise by the "
                    "fifth working day of the following month.",
                ],
            ),
            (
                "Lost or stolen cards",
                [
                    "Block a lost or stolen LumenCard immediately through the card hotline printed on the back and inform "
                    "the finance helpdesk.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "finance/invoice-payment-terms.html",
        "Supplier Invoice and Payment Terms",
        [
            (
                "Payment terms",
                [
                    "Our standard payment terms are net 45 days from the invoice date. Suppliers who accept early payment "
                    "terms of 2/10 receive payment within ten days with a two percent discount.",
                ],
            ),
            (
                "Invoice requirements",
                [
                    "Invoices must quote a purchase order number in the format PO-2025-NNNNN and are sent as PDF to the "
                    "accounts payable mailbox. New suppliers register with form FIN-SUP-3 before their first invoice.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "finance/budget-calendar.txt",
        "Budget Calendar",
        [
            (
                "Fiscal year",
                [
                    "Our fiscal year starts on 1 February and ends on 31 January.",
                ],
            ),
            (
                "Deadlines",
                [
                    "Department budget submissions for the next fiscal year are due on 15 October. The mid-year reforecast, "
                    "called RF2, runs in August.",
                ],
            ),
            (
                "Cost centres",
                [
                    "Each department books costs to its own cost centre; IT uses cost centre CC-4410 and the People team "
                    "uses CC-2150.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- legal
    EvalDocument(
        "legal/data-protection-policy.pdf",
        "Data Protection Policy",
        [
            (
                "Responsibilities",
                [
                    "Our Data Protection Officer (DPO) is Dr. Elena Marsh. Questions about personal data go to the DPO, "
                    "who also keeps the record of processing activities.",
                ],
            ),
            (
                "Personal data breaches",
                [
                    "A personal data breach must be reported to the DPO at once. Where required by the GDPR, the DPO notifies "
                    "the supervisory authority Datatilsynet within 72 hours of becoming aware of the breach.",
                ],
            ),
            (
                "Retention and assessments",
                [
                    "CVs of unsuccessful applicants are deleted after six months. A data protection impact assessment (DPIA) "
                    "is required before starting any new processing that is likely to result in a high risk to people.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "legal/nda-guidelines.docx",
        "NDA Guidelines",
        [
            (
                "Templates",
                [
                    "Use the mutual NDA template NDA-M-07 when both parties share confidential information, and the one-way "
                    "template NDA-U-03 when only we disclose. NDAs have a term of three years.",
                ],
            ),
            (
                "Review and signature",
                [
                    "Changes to the templates need legal review, which takes up to five business days. Only directors may "
                    "sign NDAs on behalf of the company.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "legal/contract-signing-authority.md",
        "Contract Signing Authority",
        [
            (
                "Signing matrix",
                [
                    "Department heads may sign contracts with a total value up to 50,000 EUR. Vice presidents may sign up to "
                    "250,000 EUR. Contracts above 250,000 EUR are signed by the CEO, Astrid Halvorsen, together with the CFO.",
                ],
            ),
            (
                "Electronic signature",
                [
                    "Contracts are signed electronically through SignFlow; wet-ink signatures are only used where a "
                    "counterparty's law requires them.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "legal/whistleblowing-procedure.html",
        "Whistleblowing Procedure",
        [
            (
                "Reporting a concern",
                [
                    "Concerns about wrongdoing can be reported anonymously through the SpeakUp line, by phone or web form, "
                    "24 hours a day. Reports are received by our external ombudsperson, the law firm Berg & Dahl.",
                ],
            ),
            (
                "What happens next",
                [
                    "The reporter receives an acknowledgement within 7 days and feedback on the follow-up within 3 months, "
                    "as required by EU Directive 2019/1937. Retaliation against reporters is forbidden.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- security
    EvalDocument(
        "security/incident-response-plan.pdf",
        "Security Incident Response Plan",
        [
            (
                "Severity levels",
                [
                    "Security incidents are classified from SEV1 (critical: active breach or ransomware) to SEV4 (low: a "
                    "single policy violation without impact). For a SEV1 an incident bridge is opened within 10 minutes and "
                    "an incident commander from the on-call rota takes charge.",
                ],
            ),
            (
                "Reporting",
                [
                    "Report suspected security incidents to the Security Operations Centre (SOC) on extension 7777 or "
                    "through the SOC mailbox, at any hour.",
                ],
            ),
            (
                "After the incident",
                [
                    "A blameless post-mortem is written within 5 business days of closing any SEV1 or SEV2 incident.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "security/acceptable-use-policy.docx",
        "Acceptable Use Policy",
        [
            (
                "Storage and devices",
                [
                    "Company data must not be stored in personal cloud storage such as private Dropbox or Google Drive "
                    "accounts. USB mass storage devices are blocked on all company laptops.",
                ],
            ),
            (
                "AI tools",
                [
                    "Only the approved internal assistant LumenGPT may be used with company data; public AI chatbots must not "
                    "receive confidential information.",
                ],
            ),
            (
                "Clean desk",
                [
                    "Lock your screen when you leave your desk and keep no confidential papers on it overnight.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "security/access-control-standard.md",
        "Access Control Standard",
        [
            (
                "Least privilege",
                [
                    "Access is granted on the principle of least privilege. Every quarter, managers confirm their team's "
                    "access in the Access Review Campaign (ARC).",
                ],
            ),
            (
                "Privileged access",
                [
                    "Administrator and other privileged access is only used through the privileged access management tool "
                    "CyberVault, which records every session.",
                ],
            ),
            (
                "Joiners, movers and leavers",
                [
                    "When someone leaves, all of their access is removed within 24 hours of their last working day.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "security/phishing-awareness.txt",
        "Phishing Awareness Programme",
        [
            (
                "Reporting phishing",
                [
                    "Report a suspicious email with the Report Phish button in Outlook; do not forward it.",
                ],
            ),
            (
                "Simulations and training",
                [
                    "The security team sends simulated phishing emails every month. Our target is a click rate below 3 "
                    "percent. Everyone completes the PHISH-200 awareness training once a year.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- public
    EvalDocument(
        "public/company-overview.md",
        "Company Overview",
        [
            (
                "Who we are",
                [
                    "Halvorsen Maritime was founded in 1987 in Tromsø and today employs 1,240 people. Our CEO is Astrid "
                    "Halvorsen, granddaughter of the founder.",
                ],
            ),
            (
                "Where we are",
                [
                    "We have offices in Oslo, Bergen and Rotterdam. Our values are seamanship, candour and care.",
                ],
            ),
        ],
    ),
    EvalDocument(
        "public/office-facilities.html",
        "Office Facilities (Oslo)",
        [
            (
                "Getting here",
                [
                    "The Oslo office is at Fjordgata 12. Staff parking permits are issued by reception for one year at a time.",
                ],
            ),
            (
                "Canteen and gym",
                [
                    "The canteen is open from 11:00 to 13:30 on working days. The basement gym is free for staff and opens at "
                    "06:00.",
                ],
            ),
            (
                "Guests",
                [
                    "Visitors sign in at reception and can use the guest wireless network Halvo-Guest; the password changes "
                    "every Monday.",
                ],
            ),
        ],
    ),
    # ---------------------------------------------------------------- slides, spreadsheets, emails,
    # OpenDocument, RTF, and tables in Word and HTML: answers that live in a table row
    EvalDocument(
        "finance/uk-purchase-approval-matrix.xlsx",
        "UK Purchase Approval Matrix",
        [
            (
                "About this workbook",
                ["Approval levels for purchases made by Halvorsen Maritime UK Ltd, in pounds sterling."],
            )
        ],
        {
            "Approval matrix": [
                ["Purchase value", "Approval needed", "Request form"],
                ["Up to 1,000 GBP", "Team lead", "none"],
                ["1,000 to 10,000 GBP", "UK budget holder", "PR-UK-10"],
                ["10,000 to 75,000 GBP", "UK Managing Director Fiona Grant", "PR-UK-75"],
                ["Above 75,000 GBP", "Group Investment Committee", "PR-UK-GIC"],
            ],
            "Turnaround": [
                ["Request form", "Decision within"],
                ["PR-UK-10", "2 working days"],
                ["PR-UK-75", "5 working days"],
                ["PR-UK-GIC", "the next monthly committee meeting"],
            ],
        },
    ),
    EvalDocument(
        "hr/public-holidays-2026.csv",
        "Public Holidays 2026",
        [],
        {
            "Public holidays": [
                ["Date", "Holiday", "Offices closed"],
                ["1 January 2026", "New Year's Day", "Oslo, Bergen, Rotterdam"],
                ["27 April 2026", "King's Day", "Rotterdam"],
                ["1 May 2026", "Labour Day", "Oslo, Bergen"],
                ["17 May 2026", "Constitution Day", "Oslo, Bergen"],
                ["25 May 2026", "Whit Monday", "Oslo, Bergen, Rotterdam"],
                ["26 December 2026", "Boxing Day", "Oslo, Bergen, Rotterdam"],
            ]
        },
    ),
    EvalDocument(
        "it/new-starter-it-briefing.pptx",
        "New Starter IT Briefing",
        [
            (
                "Your first hour",
                [
                    "Collect your laptop from the Genbyte counter on floor 2.",
                    "Sign in with the temporary code from your welcome letter and enrol your phone in Authenticator.",
                ],
            ),
            (
                "Getting help",
                ["Chat with the bot Skipper in Teams for password resets, day and night."],
            ),
        ],
        {
            "Business systems and their owners": [
                ["System", "Used for", "Owner"],
                ["Kestrel CRM", "customer accounts and sales", "Henrik Aas"],
                ["Tidewater ERP", "orders, stock and invoices", "Maja Lund"],
                ["Beacon", "ship position tracking", "Olav Brekke"],
            ]
        },
    ),
    EvalDocument(
        "legal/records-retention-schedule.ods",
        "Records Retention Schedule",
        [],
        {
            "Retention": [
                ["Record type", "Keep for", "Owner"],
                ["Ship logbooks", "25 years", "Fleet Operations"],
                ["Crew medical certificates", "10 years after sign-off", "Marine HR"],
                ["Customer contracts", "10 years after expiry", "Legal"],
                ["CCTV recordings", "30 days", "Facilities"],
            ]
        },
    ),
    EvalDocument(
        "security/security-week-talk.odp",
        "Security Week Talk",
        [
            ("Why security week", ["Every October the security team runs Security Week with a capture-the-flag."]),
            (
                "The badge rule",
                ["Wear your access badge visibly; tailgating through the turnstiles is a disciplinary matter."],
            ),
        ],
        {
            "Prizes": [
                ["Place", "Prize"],
                ["First place", "a weekend cabin at Geilo"],
                ["Second place", "noise-cancelling headphones"],
            ]
        },
    ),
    EvalDocument(
        "public/visitor-guide.odt",
        "Visitor Guide (Bergen)",
        [
            (
                "Arriving",
                ["The Bergen office is at Bryggen 7; visitors report to the harbour-side entrance."],
            ),
            ("Parking", ["Visitor parking is arranged through reception."]),
        ],
        {
            "Parking": [
                ["Car park", "Distance", "Price per day"],
                ["Bryggen P-hus", "3 minutes on foot", "310 NOK"],
                ["Festplassen", "9 minutes on foot", "240 NOK"],
            ]
        },
    ),
    EvalDocument(
        "hr/canteen-notice.rtf",
        "Canteen Notice (Bergen)",
        [
            (
                "Opening hours",
                ["The Bergen canteen serves lunch from 11:15 to 13:00; on Fridays fish soup is served."],
            ),
            ("Allergies", ["Tell the kitchen manager Sunniva Dahl about allergies one day in advance."]),
        ],
    ),
    EvalDocument(
        "finance/q3-forecast-email.eml",
        "Q3 forecast: submission deadline",
        [
            (
                "Message",
                [
                    "Hello budget holders, the Q3 forecast is due in Anaplan by 12 September.",
                    "Please include travel separately. Regards, Karin Eide, FP&A",
                ],
            )
        ],
        {
            "Forecast owners": [
                ["Division", "Forecast owner"],
                ["Shipping", "Lars Moe"],
                ["Port services", "Eva Strand"],
            ]
        },
    ),
    EvalDocument(
        "hr/overtime-compensation.docx",
        "Overtime Compensation",
        [
            ("Principles", ["Overtime must be agreed in advance and is paid with the next salary."]),
            ("Rates", ["The supplement depends on when the overtime is worked."]),
        ],
        {
            "Rates": [
                ["When worked", "Supplement", "Time off instead"],
                ["Weekday evenings", "40 percent", "allowed"],
                ["Saturdays", "50 percent", "allowed"],
                ["Sundays and public holidays", "100 percent", "not allowed"],
            ]
        },
    ),
    EvalDocument(
        "it/software-catalogue.html",
        "Software Catalogue",
        [
            (
                "How to request software",
                ["Request software in the Helix Desk portal; licences are assigned within a day."],
            )
        ],
        {
            "Approved software": [
                ["Software", "Licence type", "Approved for"],
                ["Figma", "named user", "design and marketing"],
                ["Tableau", "named user", "finance analysts"],
                ["Notepad++", "free", "everyone"],
            ]
        },
    ),
]


# ------------------------------------------------------------------------------------ questions


def _q(question: str, docs: str | list[str], support: str | list[str], kind: str = "fact", **extra) -> GoldQuestion:
    docs_list = [docs] if isinstance(docs, str) else docs
    support_list = [support] if isinstance(support, str) else support
    return GoldQuestion(question, docs_list, support_list, kind, **extra)


HB = "hr/employee-handbook.pdf"
PL = "hr/parental-leave-policy.docx"
RW = "hr/remote-work-guidelines.md"
PR = "hr/performance-review-process.html"
ON = "hr/onboarding-checklist.txt"
VPN = "it/vpn-setup-guide.pdf"
PW = "it/password-policy.docx"
LAP = "it/laptop-replacement.md"
SD = "it/service-desk-sla.html"
BK = "it/backup-and-restore.txt"
TE = "finance/travel-expense-policy.pdf"
PROC = "finance/procurement-rules.docx"
CARD = "finance/corporate-card-guide.md"
INV = "finance/invoice-payment-terms.html"
BUD = "finance/budget-calendar.txt"
DP = "legal/data-protection-policy.pdf"
NDA = "legal/nda-guidelines.docx"
SIGN = "legal/contract-signing-authority.md"
WB = "legal/whistleblowing-procedure.html"
IR = "security/incident-response-plan.pdf"
AUP = "security/acceptable-use-policy.docx"
ACS = "security/access-control-standard.md"
PH = "security/phishing-awareness.txt"
CO = "public/company-overview.md"
OF = "public/office-facilities.html"

PAM = "finance/uk-purchase-approval-matrix.xlsx"
HOL = "hr/public-holidays-2026.csv"
BRIEF = "it/new-starter-it-briefing.pptx"
RET = "legal/records-retention-schedule.ods"
SWT = "security/security-week-talk.odp"
VG = "public/visitor-guide.odt"
CAN = "hr/canteen-notice.rtf"
FC = "finance/q3-forecast-email.eml"
OT = "hr/overtime-compensation.docx"
SW = "it/software-catalogue.html"

QUESTIONS: list[GoldQuestion] = [
    # HR
    _q("How many days of annual leave do full-time employees get?", HB, "28 days"),
    _q("How long is the probation period for new employees?", HB, "six months"),
    _q("What are the core working hours?", HB, "10:00 to 15:00"),
    _q("From which day of sickness do I need a doctor's note?", HB, "fourth calendar day"),
    _q("Who is Ingrid Solberg?", HB, "Head of People", kind="name"),
    _q("How many weeks of paid leave does the second parent get?", PL, "12 weeks"),
    _q("What is the Kinderbonus?", PL, "1,500 EUR", kind="name"),
    _q("Which form do I use to apply for parental leave?", PL, "HR-PL-22"),
    _q("What is form HR-PL-22 for?", PL, "HR-PL-22", kind="code"),
    _q("How many days per week can I work from home?", RW, "three days per week"),
    _q("How much is the home office allowance?", RW, "45 EUR per month"),
    _q("How long can I work from abroad on a workation?", RW, "30 days per calendar year"),
    _q("What is FlexDesk used for?", RW, "FlexDesk portal", kind="name"),
    _q("When does the Compass review cycle run?", PR, "every November", kind="name"),
    _q("What does a rating of 4 mean in the performance review?", PR, "4 Exceeds expectations"),
    _q("When do salary adjustments after the review take effect?", PR, "1 April"),
    _q("Where do I go on my first day?", ON, "Building C at 09:00"),
    _q("What is SAFE-101 and when must it be completed?", ON, "within 14 days", kind="code"),
    _q("Who assigns mentors to new starters?", ON, "Priya Raman", kind="name"),
    # IT
    _q("Which VPN client do we use?", VPN, "WireGuard"),
    _q("What does error VPN-809 mean?", VPN, "certificate has expired", kind="code"),
    _q("Which gateway does the VPN profile connect to?", VPN, "GW-OSL-02", kind="code"),
    _q("Is split tunnelling allowed on the VPN?", VPN, "Split tunnelling is disabled"),
    _q("What is the minimum password length?", PW, "14 characters"),
    _q("How many failed sign-in attempts lock my account?", PW, "8 failed sign-in attempts"),
    _q("How often are service account credentials rotated?", PW, "every 90 days"),
    _q("How often are laptops replaced?", LAP, "every four years"),
    _q("Which laptop models can I get?", LAP, ["ThinkPad T14 Gen 5", "MacBook Pro 14"]),
    _q("Which ticket category is used for hardware requests?", LAP, "HW-REQ", kind="code"),
    _q("What is the response time for a P1 ticket?", SD, "within 15 minutes", kind="acronym"),
    _q("What is the phone extension of the IT service desk?", SD, "4357"),
    _q("What are the staffed hours of Helix Desk?", SD, "07:00 to 19:00", kind="name"),
    _q("What are our RPO and RTO for restores?", BK, ["RPO) is 24 hours", "RTO) is 8 hours"], kind="acronym"),
    _q("Where are nightly backups stored?", BK, "Vault-B in Bergen"),
    _q("How long are backups kept?", BK, "35 days"),
    # finance
    _q("What is the per diem for trips abroad?", TE, "90 EUR per day abroad"),
    _q("What is the hotel cost limit in Oslo?", TE, "220 EUR"),
    _q("Within how many days must I submit an expense claim?", TE, "within 30 days"),
    _q("When do I need three quotes for a purchase?", PROC, "three written quotes"),
    _q("Who is Marcus Lindqvist?", PROC, "Chief Financial Officer", kind="name"),
    _q("What does ASL stand for in procurement?", PROC, "Approved Supplier List", kind="acronym"),
    _q("What is the monthly limit on the LumenCard?", CARD, "3,000 EUR", kind="name"),
    _q("How much cash can I withdraw with the corporate card?", CARD, "200 EUR per month"),
    _q("What are our standard payment terms for suppliers?", INV, "net 45 days"),
    _q("What format must purchase order numbers on invoices have?", INV, "PO-2025-NNNNN", kind="code"),
    _q("When does our fiscal year start?", BUD, "1 February"),
    _q("What is RF2?", BUD, "reforecast", kind="acronym"),
    _q("Which cost centre does IT use?", BUD, "CC-4410", kind="code"),
    # legal
    _q("Who is our DPO?", DP, "Dr. Elena Marsh", kind="acronym"),
    _q("Within how many hours must a data breach be notified to Datatilsynet?", DP, "72 hours"),
    _q("When is a DPIA required?", DP, "high risk", kind="acronym"),
    _q("Which NDA template do I use when both parties share information?", NDA, "NDA-M-07", kind="code"),
    _q("How long is the term of our NDAs?", NDA, "term of three years"),
    _q("Up to what contract value can a department head sign?", SIGN, "50,000 EUR"),
    _q("Which tool do we use for electronic signatures?", SIGN, "SignFlow", kind="name"),
    _q("How do I report wrongdoing anonymously?", WB, "SpeakUp line"),
    _q("Which law firm is our whistleblowing ombudsperson?", WB, "Berg & Dahl", kind="name"),
    # security
    _q("How fast is the incident bridge opened for a SEV1?", IR, "within 10 minutes", kind="acronym"),
    _q("What is the SOC phone extension?", IR, "extension 7777", kind="acronym"),
    _q("Can I store company files in my private Dropbox?", AUP, "personal cloud storage"),
    _q("Which AI tool may I use with company data?", AUP, "LumenGPT", kind="name"),
    _q("What is the ARC?", ACS, "Access Review Campaign", kind="acronym"),
    _q("How is privileged access managed?", ACS, "CyberVault"),
    _q("How quickly is access removed when someone leaves the company?", ACS, "within 24 hours"),
    _q("How do I report a phishing email?", PH, "Report Phish button"),
    _q("What is the target click rate in phishing simulations?", PH, "below 3"),
    # public
    _q("When was Halvorsen Maritime founded?", CO, "1987", kind="name"),
    _q("Where is the Oslo office?", OF, "Fjordgata 12"),
    _q("What is the guest WiFi network called?", OF, "Halvo-Guest", kind="name"),
    # names across documents
    _q("Who is the CEO of the company?", [CO, SIGN], "Astrid Halvorsen", kind="multi"),
    _q("What is Spendwise used for?", [TE, CARD], "Spendwise", kind="multi"),
    # follow-ups: the history holds the earlier user questions of the conversation
    _q(
        "And how many of those can I carry over to next year?",
        HB,
        "maximum of 5 days",
        kind="follow-up",
        history=["How many days of annual leave do full-time employees get?"],
        standalone="How many days of annual leave can full-time employees carry over to next year?",
    ),
    _q(
        "What about the birth parent?",
        PL,
        "20 weeks",
        kind="follow-up",
        history=["How many weeks of paid parental leave does the second parent get?"],
        standalone="How many weeks of paid parental leave does the birth parent get?",
    ),
    _q(
        "And is there an allowance for that?",
        RW,
        "45 EUR",
        kind="follow-up",
        history=["Can I work remotely from home?"],
        standalone="Is there an allowance for working remotely from home?",
    ),
    _q(
        "And what about error VPN-412?",
        VPN,
        "VPN-412",
        kind="follow-up",
        history=["My VPN client shows error VPN-809, what does that mean?"],
        standalone="What does VPN client error VPN-412 mean?",
    ),
    _q(
        "And for P2?",
        SD,
        "P2 (high): response within 1 hour",
        kind="follow-up",
        history=["What is the service desk response time for a P1 ticket?"],
        standalone="What is the service desk response time for a P2 ticket?",
    ),
    _q(
        "What about in Oslo?",
        TE,
        "220 EUR per night in Oslo",
        kind="follow-up",
        history=["What is the hotel cost limit per night on business trips?"],
        standalone="What is the hotel cost limit per night on business trips in Oslo?",
    ),
    _q(
        "Who approves the really large ones?",
        PROC,
        "Marcus Lindqvist",
        kind="follow-up",
        history=["When do purchases need a purchase order?"],
        standalone="Who approves really large purchases that need a purchase order?",
    ),
    _q(
        "And what if it is above that?",
        SIGN,
        "above 250,000 EUR",
        kind="follow-up",
        history=["Up to what value can a vice president sign contracts?"],
        standalone="Who signs contracts above the value a vice president may sign?",
    ),
    _q(
        "And how long until I get feedback?",
        WB,
        "within 3 months",
        kind="follow-up",
        history=["How do I report wrongdoing through the SpeakUp line?"],
        standalone="How long until I get feedback after reporting wrongdoing through the SpeakUp line?",
    ),
    _q(
        "When is the post-mortem due?",
        IR,
        "within 5 business days",
        kind="follow-up",
        history=["What happens when a SEV1 security incident is declared?"],
        standalone="When is the post-mortem of a SEV1 security incident due?",
    ),
    # topic switches: a history about something else; the question stands alone and must be
    # searched as asked, not with the old topic attached
    _q(
        "How many weeks of paid parental leave does the second parent get?",
        PL,
        "12 weeks",
        kind="topic-switch",
        history=["How do I reset my password?"],
        standalone="How many weeks of paid parental leave does the second parent get?",
    ),
    _q(
        "What is the guest WiFi network called?",
        OF,
        "Halvo-Guest",
        kind="topic-switch",
        history=["My VPN client shows error VPN-809, what does that mean?", "And what about error VPN-412?"],
        standalone="What is the guest WiFi network called?",
    ),
    _q(
        "What is the hotel cost limit per night on business trips?",
        TE,
        "180 EUR per night",
        kind="topic-switch",
        history=["When is the post-mortem of a SEV1 security incident due?"],
        standalone="What is the hotel cost limit per night on business trips?",
    ),
    _q(
        "How long are CVs of rejected applicants kept?",
        DP,
        "after six months",
        kind="topic-switch",
        history=[
            "How many days of annual leave do full-time employees get?",
            "And how many of those can I carry over?",
        ],
        standalone="How long are CVs of rejected applicants kept?",
    ),
    _q(
        "What is the target click rate in phishing simulations?",
        PH,
        "below 3",
        kind="topic-switch",
        history=["Up to what value can a vice president sign contracts?"],
        standalone="What is the target click rate in phishing simulations?",
    ),
    _q(
        "When are department budgets due?",
        BUD,
        "15 October",
        kind="topic-switch",
        history=["What is the service desk response time for a P1 ticket?", "And for P2?"],
        standalone="When are department budgets due?",
    ),
    # two words of its own, but the asker's action and what it is done to: it stands alone
    _q(
        "How do I contact the helpdesk?",
        SD,
        "4357",
        kind="topic-switch",
        history=["What is the Wi-Fi password for visitors and guests on the second floor?"],
        standalone="How do I contact the helpdesk?",
    ),
    _q(
        "How do I report phishing?",
        PH,
        "Report Phish button",
        kind="topic-switch",
        history=["How many days of annual leave do full-time employees get?"],
        standalone="How do I report phishing?",
    ),
    _q(
        "Where do I submit expenses?",
        TE,
        "Spendwise",
        kind="topic-switch",
        history=["When are department budgets due?"],
        standalone="Where do I submit expenses?",
    ),
    # glossary: the company's own names for things, which the documents do not use (GLOSSARY)
    _q("How many PTO days do full-time staff get?", HB, "28 days", kind="glossary"),
    _q("How many days a week can I WFH?", RW, "three days per week", kind="glossary"),
    _q("Do I need 2FA to sign in to the VPN?", VPN, "multi-factor authentication", kind="glossary"),
    _q("How often is my notebook swapped for a new one?", LAP, "every four years", kind="glossary"),
    _q("When is the helpdesk staffed?", SD, "07:00 to 19:00", kind="glossary"),
    _q("By when do I have to hand in my T&E?", TE, "within 30 days", kind="glossary"),
    _q("From what amount do I need a PO?", PROC, "5,000 EUR", kind="glossary"),
    _q("When does our FY start?", BUD, "1 February", kind="glossary"),
    _q("Is there a whistleblower hotline?", WB, "SpeakUp line", kind="glossary"),
    _q("What click rate do we aim for in phishing tests?", PH, "below 3 percent", kind="glossary"),
    _q("Can I copy files to a thumb drive?", AUP, "USB mass storage", kind="glossary"),
    _q("How many weeks of maternity leave are paid?", PL, "20 weeks", kind="glossary"),
    # answers in a table row (spreadsheets, slides, Word, HTML, OpenDocument, email) and the new formats
    _q("Which approval does a 5,000 GBP purchase need?", PAM, "Approval needed: UK budget holder", kind="table"),
    _q("Who approves a 40,000 GBP purchase in the UK?", PAM, "Fiona Grant", kind="table"),
    _q("How quickly is a PR-UK-75 request decided?", PAM, "Decision within: 5 working days", kind="table"),
    _q(
        "Is the Rotterdam office closed on King's Day?",
        HOL,
        "Holiday: King's Day | Offices closed: Rotterdam",
        kind="table",
    ),
    _q("Which offices close on 17 May 2026?", HOL, "Constitution Day", kind="table"),
    _q("Who owns the Kestrel CRM system?", BRIEF, "Owner: Henrik Aas", kind="table"),
    _q("What is Tidewater ERP used for?", BRIEF, "orders, stock and invoices", kind="table"),
    _q("Where do new starters collect their laptop?", BRIEF, "Genbyte counter"),
    _q("Which bot resets passwords in Teams?", BRIEF, "Skipper", kind="name"),
    _q("How long do we keep ship logbooks?", RET, "Keep for: 25 years", kind="table"),
    _q("How long are CCTV recordings kept?", RET, "Keep for: 30 days", kind="table"),
    _q("What is the first prize in Security Week?", SWT, "weekend cabin at Geilo", kind="table"),
    _q("Is tailgating through the turnstiles allowed?", SWT, "disciplinary matter"),
    _q("How much does a day of parking at Festplassen cost?", VG, "Price per day: 240 NOK", kind="table"),
    _q("What is the address of the Bergen office?", VG, "Bryggen 7"),
    _q("When does the Bergen canteen serve lunch?", CAN, "11:15 to 13:00"),
    _q("Who do I tell about food allergies in Bergen?", CAN, "Sunniva Dahl", kind="name"),
    _q("When is the Q3 forecast due?", FC, "12 September"),
    _q("Who owns the forecast for port services?", FC, "Forecast owner: Eva Strand", kind="table"),
    _q("What is the overtime supplement on Sundays?", OT, "Supplement: 100 percent", kind="table"),
    _q("Can I take time off instead of pay for Saturday overtime?", OT, "Time off instead: allowed", kind="table"),
    _q("Which licence type does Tableau have and who may use it?", SW, "finance analysts", kind="table"),
    _q("Who is approved to use Figma?", SW, "Approved for: design and marketing", kind="table"),
    # askers holding one tag only
    _q("How long are CVs of rejected applicants kept?", DP, "after six months", tags=["legal"]),
    _q("Which account is locked after failed attempts and for how long?", PW, "locked for 15 minutes", tags=["it"]),
    _q("Who may sign NDAs?", NDA, "Only directors", tags=["legal"]),
    _q("When are department budgets due?", BUD, "15 October", tags=["finance"]),
]


# ------------------------------------------------------------------------------------ rendering


# Boilerplate every real policy carries (scope, ownership, review): shared vocabulary across
# documents, so retrieval has near-miss distractors and documents span several chunks. It holds
# no fact a gold question asks about.
_SCOPE = {
    "hr": "people processes, line managers and the People team",
    "it": "company devices, accounts, networks and the IT department",
    "finance": "spending, approvals, suppliers and the finance department",
    "legal": "contracts, personal data, compliance and the legal department",
    "security": "information security, devices, accounts and the security team",
    "public": "everyone who works at or visits the company",
}


def boilerplate(document: EvalDocument) -> list[Section]:
    scope = _SCOPE.get(document.tag, "the whole company")
    title = document.title
    return [
        (
            "Purpose and scope",
            [
                f"This document, {title}, describes how Halvorsen Maritime handles {scope}. It applies to all "
                "permanent and temporary employees, contractors and interns in every office, unless a local "
                "agreement says otherwise.",
                "Where this document and a collective agreement differ, the collective agreement prevails. Managers "
                "are responsible for making sure their teams know and follow it, and for raising questions early.",
            ],
        ),
        (
            "Document control",
            [
                f"The owner of {title} reviews it at least once a year and after any significant change in law, "
                "organisation or tools. Earlier versions are archived and remain available on request.",
                "Questions about this document go to its owner first. Exceptions must be requested in writing, "
                "explain the business reason and be approved before they are used.",
            ],
        ),
    ]


def render(document: EvalDocument) -> bytes:
    """The document's bytes in the format its extension names (with its boilerplate sections, and
    its tables where that format keeps them)."""
    from ragchat.evaluation import docgen

    extension = document.path.rsplit(".", 1)[-1]
    tables = document.tables
    if extension in {"xlsx", "ods", "csv"}:  # a workbook: its tables are the sheets
        if extension == "csv":
            return docgen.make_csv(next(iter(tables.values())))
        sheets: dict[str, list[list]] = dict(tables)
        notes = [[paragraph] for _, paragraphs in document.sections for paragraph in paragraphs]
        if notes:
            sheets["Read me"] = notes
        if extension == "xlsx":
            return docgen.make_xlsx(sheets, title=document.title)
        return docgen.make_ods(sheets, title=document.title)
    sections = [*boilerplate(document)[:1], *document.sections, *boilerplate(document)[1:]]
    headings = [heading for heading, _ in sections]
    # a table goes after the section of its name, or into a section of its own before the last
    for name in tables:
        if name not in headings:
            sections.insert(len(sections) - 1, (name, []))
            headings.insert(len(headings) - 1, name)
    at = {headings.index(name): rows for name, rows in tables.items()}
    if extension == "pdf":
        pages = ["\n".join([heading, *paragraphs]) for heading, paragraphs in sections]
        return docgen.make_pdf(pages, title=document.title, sections=headings)
    if extension == "docx":
        return docgen.make_docx(sections, title=document.title, tables=at)
    if extension == "odt":
        return docgen.make_odt(sections, title=document.title, tables=at)
    if extension == "html":
        return docgen.make_html(sections, title=document.title, script=None, tables=at)
    if extension in {"pptx", "odp"}:
        maker = docgen.make_pptx if extension == "pptx" else docgen.make_odp
        return maker(sections, title=document.title, tables=at)
    if extension == "eml":
        body = [paragraph for _, paragraphs in document.sections for paragraph in paragraphs]
        table_html = "".join(docgen.html_table(rows) for rows in tables.values())
        html_body = docgen.html_paragraphs(body) + table_html
        return docgen.make_eml(subject=document.title, body="\n\n".join(body), html_body=html_body)
    if extension == "md":
        return docgen.make_markdown(sections, title=document.title)
    paragraphs = [document.title]
    for heading, body in sections:
        paragraphs += [heading, *body]
    if extension == "txt":
        return docgen.make_text(paragraphs)
    if extension == "rtf":
        return docgen.make_rtf(paragraphs)
    raise ValueError(f"no renderer for {document.path}")


QUESTIONS_FILE = "questions.jsonl"
GLOSSARY_FILE = "glossary.csv"

# The company's glossary (tag, term, aliases): names people use that the documents do not. Written
# next to the documents as the admin's CSV; `evaluate` expands queries with it as the chat does.
GLOSSARY: list[tuple[str, str, str]] = [
    ("hr", "PTO", "paid annual leave; annual leave; holiday"),
    ("hr", "WFH", "work remotely; remote work; home office"),
    ("hr", "maternity leave", "parental leave; birth parent"),
    ("it", "2FA", "multi-factor authentication; MFA"),
    ("it", "notebook", "laptop; company laptops"),
    ("it", "helpdesk", "service desk; Helix Desk"),
    ("finance", "T&E", "travel expense; expense claims"),
    ("finance", "PO", "purchase order"),
    ("finance", "FY", "fiscal year"),
    ("legal", "whistleblower hotline", "SpeakUp line; report wrongdoing"),
    ("security", "phishing test", "simulated phishing emails; phishing simulations"),
    ("security", "thumb drive", "USB mass storage; USB stick"),
]


def write_corpus(folder: str | Path) -> tuple[Path, Path]:
    """Write every document under `folder/<tag>/` and the gold questions to `folder/questions.jsonl`."""
    root = Path(folder)
    for document in DOCUMENTS:
        target = root / document.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(render(document))
    glossary = root / GLOSSARY_FILE
    glossary.write_text(
        "tag,term,aliases\n" + "".join(f'{tag},"{term}","{aliases}"\n' for tag, term, aliases in GLOSSARY),
        encoding="utf-8",
    )
    questions = root / QUESTIONS_FILE
    with questions.open("w", encoding="utf-8") as out:
        for question in QUESTIONS:
            out.write(json.dumps(question.as_dict(), ensure_ascii=False) + "\n")
    return root, questions
