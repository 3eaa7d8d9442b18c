"""safe_filename: no directories, control characters, spoofing or reserved names."""

from __future__ import annotations

import pytest

from ragchat.services.parsing import safe_filename


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("/etc/shadow", "shadow"),
        ("..\\..\\Windows\\system.ini", "system.ini"),
        ("a\x00b.pdf", "ab.pdf"),
        ("tab\there\n.txt", "tab here.txt"),
        ("..", "document"),
        ("", "document"),
        ("   ", "document"),
        ("CON.txt", "_CON.txt"),
        ("report\u202egpj.exe", "reportgpj.exe"),  # right-to-left override spoofing an extension
        ("e\u0301te\u0301.md", "\u00e9t\u00e9.md"),  # NFC
        ('what?<>:"|*.txt', "what_______.txt"),
        (".hidden", "hidden"),
    ],
)
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected


def test_safe_filename_caps_long_names_and_keeps_the_extension():
    result = safe_filename("x" * 500 + ".pdf")
    assert len(result) == 150 and result.endswith(".pdf")
    wide = safe_filename("\U0001f600" * 200 + ".docx")
    assert wide.endswith(".docx") and len(wide.encode("utf-8")) <= 240


def test_safe_filename_accepts_undecodable_bytes():
    assert safe_filename(b"r\xe9sum\xe9.pdf") == "r\ufffdsum\ufffd.pdf"
