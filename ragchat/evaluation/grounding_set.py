"""A labelled set for the per-sentence grounding check (ragchat/services/grounding.py): answer
sentences, each with the passage of the evaluation corpus it cites and a person's label: does that
passage support the sentence?

Written by hand against the corpus's passages (ragchat/evaluation/corpus.py), not tuned on the
check: supported sentences paraphrase, reorder, shorten or combine what the passage says (number
words, plurals, other word forms); unsupported ones change a figure, a name or a place, add a
detail the passage does not have, answer from another passage, negate the passage, or swap who does
what. The last two reuse the passage's own words and are the lexical check's expected misses.

    score_grounding() -> {"sentences", "unsupported", "precision", "recall", "accuracy", ...}

The positive class is "unsupported" (what the check must flag): precision = flagged sentences that
are really unsupported / flagged; recall = unsupported sentences flagged / unsupported sentences.
Each sentence is checked as an answer would be: against the cited passage plus the two passages
that follow it in the corpus (other context in the prompt), so support from an uncited passage
counts as support ("uncited"), as in the chat.
"""

from __future__ import annotations

from typing import Any

from ragchat.evaluation.corpus import DOCUMENTS
from ragchat.services.grounding import check_answer
from ragchat.services.types import SearchResult

S, U = True, False
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

# (document, section, paragraph, sentence, supported by that paragraph?, why: the kind of case)
LABELLED: list[tuple[str, int, int, str, bool, str]] = [
    (HB, 0, 0, "Full-time employees get 28 days of paid annual leave each calendar year.", S, "paraphrase"),
    (HB, 0, 0, "Part-time staff receive leave pro rata to their contracted hours.", S, "paraphrase"),
    (HB, 0, 0, "Full-time employees get 30 days of paid annual leave each year.", U, "figure"),
    (HB, 0, 0, "Annual leave can be sold back to the company for cash at the end of the year.", U, "added"),
    (HB, 0, 1, "You can carry over at most five unused days, which expire after 31 March.", S, "number word"),
    (HB, 0, 1, "Unused leave may be carried over up to a maximum of 10 days.", U, "figure"),
    (HB, 0, 1, "Leave requests go through the HR portal and your line manager approves them.", S, "word forms"),
    (HB, 0, 1, "Leave is requested in the HR portal and approved by the People team director.", U, "name"),
    (HB, 1, 0, "New contracts start with a six-month probation period.", S, "paraphrase"),
    (HB, 1, 0, "During probation either side can end the employment with four weeks' notice.", U, "figure"),
    (HB, 1, 1, "Core hours are from 10:00 to 15:00, Monday to Friday.", S, "shortened"),
    (HB, 1, 1, "Overtime is paid at 150% of the hourly salary.", U, "added"),
    (HB, 1, 1, "Overtime does not need to be agreed with the manager in advance.", U, "negation"),
    (HB, 2, 0, "If you are ill, notify your manager before 09:30 on the first day.", S, "shortened"),
    (HB, 2, 0, "A doctor's note is needed from the fourth calendar day of sickness.", S, "paraphrase"),
    (HB, 2, 0, "A doctor's note is required from the second day of sickness.", U, "figure"),
    (HB, 2, 1, "Ingrid Solberg, Head of People, owns the handbook.", S, "reordered"),
    (HB, 2, 1, "The handbook is owned by Priya Raman from the legal team.", U, "name"),
    (PL, 0, 0, "The birth parent gets 20 weeks of fully paid parental leave.", S, "paraphrase"),
    (PL, 0, 0, "The second parent is entitled to twelve weeks of fully paid leave.", S, "number word"),
    (PL, 0, 0, "The second parent is entitled to 16 weeks of fully paid leave.", U, "figure"),
    (PL, 0, 0, "Adoptive parents are not covered by the parental leave policy.", U, "negation"),
    (PL, 0, 1, "Parental leave can be split into up to three blocks within 24 months of the birth.", S, "paraphrase"),
    (PL, 0, 1, "Parental leave must be taken in one continuous block.", U, "contradiction"),
    (PL, 1, 0, "Each new parent receives a one-off Kinderbonus of 1,500 EUR.", S, "shortened"),
    (PL, 1, 0, "The Kinderbonus is 2,500 EUR per child.", U, "figure"),
    (PL, 1, 0, "The Kinderbonus is paid in cash at the reception desk.", U, "added"),
    (PL, 2, 0, "Submit form HR-PL-22 at least eight weeks before your leave starts.", S, "paraphrase"),
    (PL, 2, 0, "The People team confirms the dates in writing within ten working days.", S, "shortened"),
    (PL, 2, 0, "Form HR-PL-22 must be submitted at least two weeks before leave starts.", U, "figure"),
    (RW, 0, 0, "Employees can work remotely up to three days a week if their role allows it.", S, "paraphrase"),
    (RW, 0, 0, "The shared office day is usually Tuesday.", S, "shortened"),
    (RW, 0, 0, "Employees may work remotely every day of the week.", U, "contradiction"),
    (
        RW,
        1,
        0,
        "People with an approved remote arrangement receive a home office allowance of 45 EUR per month.",
        S,
        "paraphrase",
    ),
    (RW, 1, 0, "The home office allowance is 100 EUR per month.", U, "figure"),
    (RW, 1, 0, "The allowance also covers a new laptop every two years.", U, "added"),
    (RW, 2, 0, "Workations are allowed for at most 30 days per calendar year inside the EU/EEA.", S, "paraphrase"),
    (RW, 2, 0, "A workation in the United States is allowed for up to 30 days.", U, "place"),
    (PR, 0, 0, "The annual performance review cycle, Compass, runs every November.", S, "reordered"),
    (PR, 0, 0, "Managers collect 360-degree feedback from three peers.", S, "shortened"),
    (PR, 0, 0, "Compass runs twice a year, in May and November.", U, "added"),
    (PR, 2, 0, "Salary adjustments from Compass take effect on 1 April of the following year.", S, "shortened"),
    (PR, 2, 0, "Salary adjustments from Compass take effect on 1 January.", U, "figure"),
    (ON, 0, 0, "On your first day, come to the reception of Building C at 09:00.", S, "reordered"),
    (ON, 0, 0, "Your buddy takes you to the IT Bar where your laptop and badge are waiting.", S, "paraphrase"),
    (ON, 0, 0, "On your first day, come to the reception of Building A at 08:00.", U, "figure"),
    (ON, 1, 0, "The SAFE-101 course must be completed within 14 days of your start date.", S, "paraphrase"),
    (ON, 1, 0, "The SAFE-101 course is optional for new employees.", U, "contradiction"),
    (VPN, 0, 0, "Remote access uses the WireGuard VPN client.", S, "verbatim"),
    (VPN, 0, 0, "The profile connects to gateway GW-OSL-02 in Oslo.", S, "verbatim"),
    (VPN, 0, 0, "Remote access uses the Cisco AnyConnect client.", U, "name"),
    (VPN, 0, 1, "Sign-in needs multi-factor authentication with the HalvoKey app.", S, "paraphrase"),
    (VPN, 0, 1, "Split tunnelling is enabled, so only company traffic goes through the VPN.", U, "contradiction"),
    (VPN, 1, 0, "Error VPN-809 means your device certificate has expired.", S, "shortened"),
    (
        VPN,
        1,
        0,
        "Error VPN-412 means the gateway is in maintenance, so wait fifteen minutes and retry.",
        S,
        "paraphrase",
    ),
    (VPN, 1, 0, "Error VPN-412 means your password has expired.", U, "swap"),
    (VPN, 1, 0, "Error VPN-809 requires you to reinstall the operating system.", U, "added"),
    (PW, 0, 0, "Passwords must be at least 14 characters long.", S, "verbatim"),
    (PW, 0, 0, "Passwords must be at least 8 characters long.", U, "figure"),
    (PW, 0, 0, "Passwords are rotated every 60 days.", U, "contradiction"),
    (PW, 1, 0, "After 8 failed sign-in attempts the account is locked for 15 minutes.", S, "reordered"),
    (PW, 1, 0, "An account is locked for 30 minutes after 5 failed sign-in attempts.", U, "figure"),
    (PW, 2, 0, "Work passwords belong in the company Bitwarden vault.", S, "paraphrase"),
    (PW, 2, 0, "Service account credentials are rotated every 90 days by their technical owner.", S, "shortened"),
    (PW, 2, 0, "Work passwords should be stored in the 1Password team vault.", U, "name"),
    (LAP, 0, 0, "Company laptops are replaced every four years from the delivery date.", S, "shortened"),
    (LAP, 0, 0, "Laptops are replaced every 36 months.", U, "figure"),
    (LAP, 1, 0, "The standard model is the ThinkPad T14 Gen 5 with 32 GB of memory.", S, "verbatim"),
    (LAP, 1, 0, "Software developers may choose a MacBook Pro 14 instead of the standard model.", S, "paraphrase"),
    (LAP, 1, 0, "The standard model is the Dell Latitude 7440 with 16 GB of memory.", U, "name"),
    (LAP, 2, 0, "Request a replacement with a service desk ticket in category HW-REQ.", S, "paraphrase"),
    (LAP, 2, 0, "Returned laptops are donated to local schools.", U, "added"),
    (SD, 0, 0, "The IT service desk, Helix Desk, can be reached on extension 4357.", S, "paraphrase"),
    (SD, 0, 0, "The service desk is staffed from 07:00 to 19:00 CET on working days.", S, "paraphrase"),
    (SD, 0, 0, "The service desk is staffed around the clock, seven days a week.", U, "contradiction"),
    (SD, 1, 0, "P1 tickets get a response within 15 minutes and a resolution target of 4 hours.", S, "paraphrase"),
    (SD, 1, 0, "P2 tickets get a response within 1 hour.", S, "shortened"),
    (SD, 1, 0, "P2 tickets get a response within 4 hours.", U, "figure"),
    (SD, 1, 1, "Outside staffed hours, P1 incidents page the on-call engineer through OpsGenie.", S, "verbatim"),
    (SD, 1, 1, "Outside staffed hours, P1 incidents are handled by the vendor's hotline in India.", U, "added"),
    (BK, 0, 0, "Servers are backed up every night at 01:30 to the Vault-B data centre in Bergen.", S, "paraphrase"),
    (BK, 0, 0, "Backups are kept for 35 days.", S, "verbatim"),
    (BK, 0, 0, "Backups are kept for one year.", U, "figure"),
    (BK, 1, 0, "The recovery point objective is 24 hours and the recovery time objective is 8 hours.", S, "shortened"),
    (BK, 1, 0, "The recovery time objective is 24 hours.", U, "swap"),
    (TE, 0, 0, "The per diem is 65 EUR per day for domestic trips and 90 EUR abroad.", S, "shortened"),
    (TE, 0, 0, "The per diem abroad is 120 EUR per day.", U, "figure"),
    (TE, 1, 0, "Hotel costs are capped at 180 EUR per night, or 220 EUR in Oslo and London.", S, "shortened"),
    (TE, 1, 0, "Business class flights need a vice president's approval.", S, "word forms"),
    (TE, 1, 0, "Hotel costs in Paris are capped at 250 EUR per night.", U, "place"),
    (TE, 2, 0, "Expense claims are submitted in Spendwise within 30 days of the trip.", S, "word forms"),
    (TE, 2, 0, "Receipts are needed for every item above 25 EUR.", S, "paraphrase"),
    (TE, 2, 0, "Expense claims can be submitted up to 90 days after the trip.", U, "figure"),
    (PROC, 0, 0, "Purchases above 5,000 EUR need a purchase order before anything is ordered.", S, "paraphrase"),
    (PROC, 0, 0, "Purchases above 25,000 EUR require three written quotes.", S, "verbatim"),
    (PROC, 0, 0, "Purchases above 10,000 EUR require two written quotes.", U, "figure"),
    (
        PROC,
        1,
        0,
        "Marcus Lindqvist, the Chief Financial Officer, approves purchases above 100,000 EUR.",
        S,
        "reordered",
    ),
    (PROC, 1, 0, "Purchases above 100,000 EUR are approved by the CEO, Astrid Halvorsen.", U, "name"),
    (CARD, 0, 0, "The LumenCard has a monthly limit of 3,000 EUR.", S, "shortened"),
    (CARD, 0, 0, "Personal use of the LumenCard is allowed up to 500 EUR.", U, "contradiction"),
    (CARD, 1, 0, "Cash withdrawals are limited to 200 EUR per month.", S, "verbatim"),
    (
        CARD,
        1,
        0,
        "Card transactions are reconciled in Spendwise by the fifth working day of the next month.",
        S,
        "word forms",
    ),
    (INV, 0, 0, "Standard payment terms are net 45 days from the invoice date.", S, "shortened"),
    (INV, 0, 0, "Standard payment terms are net 30 days.", U, "figure"),
    (INV, 1, 0, "New suppliers register with form FIN-SUP-3 before their first invoice.", S, "verbatim"),
    (INV, 1, 0, "Invoices are sent by post to the finance department in Rotterdam.", U, "added"),
    (BUD, 0, 0, "The fiscal year runs from 1 February to 31 January.", S, "paraphrase"),
    (BUD, 0, 0, "The fiscal year follows the calendar year.", U, "contradiction"),
    (BUD, 1, 0, "Department budgets for the next fiscal year are due on 15 October.", S, "paraphrase"),
    (BUD, 1, 0, "Department budgets are due on 1 December.", U, "figure"),
    (DP, 0, 0, "The Data Protection Officer is Dr. Elena Marsh.", S, "abbreviation"),
    (DP, 0, 0, "The Data Protection Officer is Ingrid Solberg.", U, "name"),
    (DP, 1, 0, "The DPO notifies Datatilsynet within 72 hours of becoming aware of a breach.", S, "paraphrase"),
    (DP, 1, 0, "Breaches are reported to the supervisory authority within 7 days.", U, "figure"),
    (DP, 2, 0, "CVs of unsuccessful applicants are deleted after six months.", S, "verbatim"),
    (DP, 2, 0, "CVs of unsuccessful applicants are kept for two years.", U, "figure"),
    (NDA, 0, 0, "Use template NDA-M-07 when both parties share confidential information.", S, "paraphrase"),
    (NDA, 0, 0, "NDAs have a term of three years.", S, "verbatim"),
    (NDA, 0, 0, "NDAs have a term of five years.", U, "figure"),
    (NDA, 1, 0, "Only directors may sign NDAs on behalf of the company.", S, "verbatim"),
    (NDA, 1, 0, "Any manager may sign NDAs on behalf of the company.", U, "swap"),
    (SIGN, 0, 0, "Vice presidents may sign contracts up to 250,000 EUR.", S, "shortened"),
    (SIGN, 0, 0, "Department heads may sign contracts up to 100,000 EUR.", U, "figure"),
    (SIGN, 0, 0, "Contracts above 250,000 EUR are signed by the CEO together with the CFO.", S, "shortened"),
    (SIGN, 1, 0, "Contracts are signed electronically through SignFlow.", S, "shortened"),
    (SIGN, 1, 0, "Contracts are signed electronically through DocuSign.", U, "name"),
    (WB, 0, 0, "Wrongdoing can be reported anonymously through the SpeakUp line, 24 hours a day.", S, "paraphrase"),
    (WB, 0, 0, "Reports are received by the HR department.", U, "name"),
    (WB, 1, 0, "The reporter gets an acknowledgement within 7 days and feedback within 3 months.", S, "paraphrase"),
    (WB, 1, 0, "The reporter gets feedback within 6 weeks.", U, "figure"),
    (IR, 0, 0, "For a SEV1 an incident bridge is opened within 10 minutes.", S, "shortened"),
    (IR, 0, 0, "For a SEV1 an incident bridge is opened within 60 minutes.", U, "figure"),
    (IR, 1, 0, "Suspected security incidents are reported to the SOC on extension 7777.", S, "word forms"),
    (IR, 2, 0, "A blameless post-mortem is written within 5 business days of closing a SEV1 incident.", S, "shortened"),
    (IR, 2, 0, "A post-mortem is only written for SEV3 incidents.", U, "contradiction"),
    (AUP, 0, 0, "USB mass storage devices are blocked on company laptops.", S, "shortened"),
    (AUP, 0, 0, "Company data may be stored in a private Dropbox if it is encrypted.", U, "contradiction"),
    (AUP, 1, 0, "Only the approved internal assistant LumenGPT may be used with company data.", S, "verbatim"),
    (AUP, 1, 0, "ChatGPT may be used with confidential information after a training.", U, "added"),
    (ACS, 0, 0, "Managers confirm their team's access every quarter in the Access Review Campaign.", S, "reordered"),
    (ACS, 1, 0, "Privileged access goes through CyberVault, which records every session.", S, "paraphrase"),
    (
        ACS,
        2,
        0,
        "When someone leaves, their access is removed within 24 hours of their last working day.",
        S,
        "paraphrase",
    ),
    (ACS, 2, 0, "When someone leaves, their access is removed within 30 days.", U, "figure"),
    (PH, 1, 0, "The target click rate in phishing simulations is below 3 percent.", S, "reordered"),
    (PH, 1, 0, "Everyone completes the PHISH-200 awareness training once a year.", S, "verbatim"),
    (PH, 1, 0, "Simulated phishing emails are sent every week.", U, "figure"),
    (CO, 0, 0, "Halvorsen Maritime was founded in 1987 in Tromsø.", S, "shortened"),
    (CO, 0, 0, "The company employs 1,240 people.", S, "paraphrase"),
    (CO, 0, 0, "Halvorsen Maritime was founded in 1995 in Bergen.", U, "figure"),
    (CO, 1, 0, "The company has offices in Oslo, Bergen and Rotterdam.", S, "paraphrase"),
    (CO, 1, 0, "The company has offices in Oslo, Stockholm and Hamburg.", U, "place"),
    (OF, 0, 0, "The Oslo office is at Fjordgata 12.", S, "verbatim"),
    (OF, 1, 0, "The canteen is open from 11:00 to 13:30 on working days.", S, "verbatim"),
    (OF, 1, 0, "The basement gym costs 20 EUR per month for staff.", U, "contradiction"),
    (OF, 2, 0, "Visitors can use the guest wireless network Halvo-Guest.", S, "shortened"),
    (OF, 2, 0, "The guest WiFi password changes every day.", U, "figure"),
]


def _passages() -> list[tuple[str, int, int, str, str]]:
    """(path, section, paragraph, heading, text) of every paragraph of the corpus, in order."""
    out = []
    for document in DOCUMENTS:
        for s, (heading, paragraphs) in enumerate(document.sections):
            for p, text in enumerate(paragraphs):
                out.append((document.path, s, p, heading, text))
    return out


def _result(index: int, passage: tuple[str, int, int, str, str]) -> SearchResult:
    path, s, p, heading, text = passage
    return SearchResult(
        document_id=f"00000000-0000-4000-8000-{index:012d}",
        chunk_index=0,
        document_name=path.rsplit("/", 1)[-1],
        chunk_text=text,
        score=0.8,
        section=heading,
    )


def score_grounding() -> dict[str, Any]:
    """Run the check on every labelled sentence; precision and recall of flagging unsupported ones."""
    passages = _passages()
    position = {(path, s, p): i for i, (path, s, p, _, _) in enumerate(passages)}
    rows = []
    for path, s, p, sentence, supported, why in LABELLED:
        i = position[(path, s, p)]
        cited = _result(i, passages[i])
        others = [_result(j, passages[j]) for j in (i + 1, i + 2) if j < len(passages)]
        answer = f"{sentence.rstrip('.')} [SourceId: {cited.source_id}]."
        report = check_answer(answer, [cited, *others])
        statuses = [x.status for x in report.sentences if x.status != "none"]
        flagged = "unsupported" in statuses or not statuses
        rows.append({"sentence": sentence, "supported": supported, "why": why, "flagged": flagged,
                     "status": statuses[0] if statuses else "none"})  # fmt: skip
    positives = [r for r in rows if not r["supported"]]
    flagged = [r for r in rows if r["flagged"]]
    true_positives = sum(1 for r in flagged if not r["supported"])
    misses: dict[str, int] = {}
    for r in positives:
        if not r["flagged"]:
            misses[r["why"]] = misses.get(r["why"], 0) + 1
    return {
        "sentences": len(rows),
        "unsupported": len(positives),
        "flagged": len(flagged),
        "precision": true_positives / len(flagged) if flagged else 0.0,
        "recall": true_positives / len(positives) if positives else 0.0,
        "accuracy": sum(1 for r in rows if r["flagged"] != r["supported"]) / len(rows),
        "false_alarms": [r["sentence"] for r in rows if r["flagged"] and r["supported"]],
        "missed_by_kind": misses,
        "rows": rows,
    }
